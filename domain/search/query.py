"""A search query: its words and "quoted phrases", each a group of index words that must
appear in a row in the message; every group must match, in any order."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ctxstore.domain.errors import InvalidOperationError
from ctxstore.domain.search.text import fold, words

MAX_QUERY = 1000  # characters
MAX_GROUPS = 32
PIECES = re.compile(r'"([^"]*)"|(\S+)')


@dataclass(frozen=True)
class Query:
    """What was asked: each group's index words (a phrase of one or more), and the folded
    text of each group as it was typed (what a snippet marks)."""

    groups: tuple[tuple[str, ...], ...]
    shown: tuple[str, ...]

    def fts5(self) -> str:
        """SQLite FTS5's MATCH expression: every group as a phrase (its words are letters
        and digits only, so nothing needs quoting inside)."""
        return " AND ".join('"' + " ".join(g) + '"' for g in self.groups)

    def tsquery(self) -> str:
        """PostgreSQL's tsquery, as text: every group a phrase of lexemes (<->), all (&)."""
        return " & ".join("(" + " <-> ".join(f"'{w}'" for w in g) + ")" for g in self.groups)

    def matches(self, terms: list[str]) -> bool:
        """Whether a message's index words hold every group, each in a row (a scan: the
        memory store's, which has no engine)."""
        return all(_holds(terms, g) for g in self.groups)


def _holds(terms: list[str], group: tuple[str, ...]) -> bool:
    n = len(group)
    first = group[0]
    return any(t == first and tuple(terms[i : i + n]) == group for i, t in enumerate(terms))


def parse_query(text: object) -> Query:
    """The query's groups; raises InvalidOperationError for one that asks for nothing."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidOperationError('a search needs a query: words, or a "quoted phrase"')
    if len(text) > MAX_QUERY:
        raise InvalidOperationError(f"a query is at most {MAX_QUERY} characters, got {len(text)}")
    groups: list[tuple[str, ...]] = []
    shown: list[str] = []
    for quoted, bare in PIECES.findall(text):
        piece = quoted if quoted else bare
        found = tuple(words(piece))
        if found and found not in groups:
            groups.append(found)
            shown.append(fold(piece).strip())
    if not groups:
        raise InvalidOperationError(f"the query {text!r:.80} holds no letters or digits")
    if len(groups) > MAX_GROUPS:
        raise InvalidOperationError(f"a query holds at most {MAX_GROUPS} words and phrases")
    return Query(tuple(groups), tuple(shown))


__all__ = ["Query", "parse_query"]
