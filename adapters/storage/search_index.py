"""The search index: a read model of the text of every message each context was given, on
the database's own full-text engine (SQLite FTS5, PostgreSQL's tsvector with a GIN index).

Rows are written by the catch-up (adapters/store/search.py) off the callers' commits: per
context, the messages its events since the version the index reached wrote, each row once
(context, version, message); then which rows are visible in the context's current state.
The index tracks two positions: per context the version it holds, and over all contexts
the audit index's position it has caught up to (which contexts changed since is read
there, in commit order on either database). Erasure and history bounds delete a context's
rows in the transaction that deletes its events (adapters/storage/sqlite.py, postgres.py).
"""

from __future__ import annotations

import math
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxstore.domain.search.query import Query
from ctxstore.domain.search.text import words

TABLE = "ctxstore_search"
HEADS = "ctxstore_search_heads"  # per context: the version indexed
POSITION = "ctxstore_search_position"  # the audit position caught up to
PENDING = "ctxstore_search_pending"  # contexts to index anew (their history was bounded)


@dataclass(frozen=True)
class SearchRow:
    """One message's text as a context's event at `version` wrote it."""

    context_hex: str
    message_id: str
    version: int
    role: str
    at: int  # microseconds since the epoch
    tenant: str | None
    text: str
    digest: str  # of the text: which row a visible message's current text is
    name: str | None = None  # the context's (a name never changes)


@dataclass(frozen=True)
class SearchFilter:
    """What a search is limited to; None means any."""

    tenant: str | None = None
    context_hexes: Sequence[str] | None = None
    roles: Sequence[str] | None = None
    since: int | None = None  # microseconds, inclusive
    until: int | None = None  # exclusive
    include_hidden: bool = False


@dataclass(frozen=True)
class Found:
    """A row that matched, with its score (higher is better) and its key for paging."""

    row: SearchRow
    score: float
    key: int  # the row's id: ties in score are paged by it
    visible: bool


@dataclass(frozen=True)
class Read:
    """What the rows to store were read from: the version the index held (`since`) and
    how many of the context's events after it. Stored only while both still hold: a
    history bound removed events read (or rows below them: the head went), or another
    catch-up stored a newer version first (storing this older view would show what the
    context showed before, under the newer head)."""

    since: int
    events: int


@dataclass(frozen=True)
class After:
    """Where the previous page ended: its last hit's score and key."""

    score: float
    key: int


def sql_filter(
    where: SearchFilter, mark: str, visible: str, member: Callable[[str, Sequence[str]], tuple[str, list[Any]]],
) -> tuple[str, list[Any]]:  # fmt: skip
    """The WHERE conditions of a filter over rows aliased `s` (each after " AND "), and
    their parameters: `mark` is the driver's placeholder, `visible` the visible rows'
    condition, `member` a column's condition of being one of some values."""
    clauses: list[str] = []
    params: list[Any] = []
    if not where.include_hidden:
        clauses.append(visible)
    for column, values in (("s.context_id", where.context_hexes), ("s.role", where.roles)):
        if values is not None:
            clause, given = member(column, values)
            clauses.append(clause)
            params += given
    for condition, value in (("s.tenant = ", where.tenant), ("s.ts >= ", where.since),
                             ("s.ts < ", where.until)):  # fmt: skip
        if value is not None:
            clauses.append(condition + mark)
            params.append(value)
    return "".join(" AND " + c for c in clauses), params


class SearchIndex(ABC):
    """One store's search index."""

    seen_newest: int | None = None  # the newest event id at the last complete catch-up

    def newest_event(self) -> int:
        """The newest stored event's id (-1: unknown, so a catch-up always looks)."""
        return -1

    @abstractmethod
    def create_table(self) -> None:
        """Create the index's tables if missing."""

    @abstractmethod
    def position(self) -> int:
        """The audit position the index caught up to."""

    @abstractmethod
    def advance(self, position: int) -> None:
        """Record that every context changed up to this audit position is indexed."""

    def pending(self) -> list[str]:
        """Contexts a history bound left to be indexed anew (from what they kept)."""
        return []

    @abstractmethod
    def head(self, context_hex: str) -> int:
        """The version of the context the index holds (0: none)."""

    @abstractmethod
    def store(
        self, context_hex: str, rows: Sequence[SearchRow], visible: dict[str, str], head: int,
        only: set[str] | None = None, read: Read | None = None,
    ) -> bool:  # fmt: skip
        """In one transaction: add the rows (each once), make visible exactly the newest row
        of each message whose digest `visible` maps it to (of the messages in `only`, when
        given: the others keep what they were), and hold `head` as the version reached (and
        the context no longer pending). A context whose events are gone (erased meanwhile)
        gets no rows. With `read`: nothing is stored, and False returned, when the context
        changed under the reader (see Read)."""

    @abstractmethod
    def forget(self, context_hex: str) -> None:
        """Drop every row of a context (a context found gone, or a reindex)."""

    @abstractmethod
    def query(
        self, query: Query, where: SearchFilter, after: After | None, limit: int
    ) -> list[Found]:
        """The best matches after `after`, best first (ties by key), at most `limit`."""

    def rewind(self) -> None:
        """Walk the audit index again from its start (after it was rebuilt: its positions
        may be numbered anew); each context's rows and head stay."""
        self.advance_to(0)

    @abstractmethod
    def advance_to(self, position: int) -> None:
        """Hold exactly this audit position as the one reached."""

    @abstractmethod
    def reset(self) -> None:
        """Forget every row and position: the next catch-up indexes every context anew."""

    def count(self) -> int:
        """How many rows the index holds."""
        return 0


@dataclass
class _Held:
    row: SearchRow
    terms: list[str]
    key: int  # never given twice: pages go on from it
    visible: bool = True


@dataclass
class MemorySearchIndex(SearchIndex):
    """The memory store's index: its rows in a list, matched by scanning (memory:// has no
    engine; it holds what one test or one process writes)."""

    rows: list[_Held] = field(default_factory=list)
    heads: dict[str, int] = field(default_factory=dict)
    reached: int = 0
    keys: set[tuple[str, int, str]] = field(default_factory=set)
    made: int = 0
    guard: Any = field(default_factory=threading.RLock)  # the events' lock, on memory://
    exists: Callable[[str], bool] = lambda _: True  # whether a context still has events

    def create_table(self) -> None:
        pass

    def position(self) -> int:
        return self.reached

    def advance(self, position: int) -> None:
        self.reached = max(self.reached, position)

    def advance_to(self, position: int) -> None:
        self.reached, self.seen_newest = position, None

    def head(self, context_hex: str) -> int:
        return self.heads.get(context_hex, 0)

    def store(
        self, context_hex: str, rows: Sequence[SearchRow], visible: dict[str, str], head: int,
        only: set[str] | None = None, read: Read | None = None,
    ) -> bool:  # fmt: skip
        with self.guard:
            if not self.exists(context_hex):
                self._forget(context_hex)
            elif read is not None and self.heads.get(context_hex, 0) != read.since:
                return False
            else:
                self._store(context_hex, rows, visible, head, only)
            return True

    def _store(
        self, context_hex: str, rows: Sequence[SearchRow], visible: dict[str, str], head: int,
        only: set[str] | None,
    ) -> None:  # fmt: skip
        for r in rows:
            key = (r.context_hex, r.version, r.message_id)
            if key not in self.keys:
                self.keys.add(key)
                self.made += 1
                self.rows.append(_Held(r, words(r.text), self.made))
        newest: dict[str, _Held] = {}
        for held in self.rows:
            if held.row.context_hex == context_hex and (
                only is None or held.row.message_id in only
            ):
                held.visible = False
                if visible.get(held.row.message_id) == held.row.digest:
                    newest[held.row.message_id] = held
        for held in newest.values():
            held.visible = True
        self.heads[context_hex] = max(self.heads.get(context_hex, 0), head)

    def forget(self, context_hex: str) -> None:
        with self.guard:
            self._forget(context_hex)

    def _forget(self, context_hex: str) -> None:
        self.rows = [h for h in self.rows if h.row.context_hex != context_hex]
        self.keys = {k for k in self.keys if k[0] != context_hex}
        self.heads.pop(context_hex, None)

    def query(
        self, query: Query, where: SearchFilter, after: After | None, limit: int
    ) -> list[Found]:
        found = []
        with self.guard:
            rows = list(self.rows)
        for held in rows:
            key = held.key
            r = held.row
            if not _admits(where, r, held.visible) or not query.matches(held.terms):
                continue
            hits = sum(held.terms.count(g[0]) for g in query.groups)
            score = round(hits / math.sqrt(len(held.terms) + 1), 9)  # dense matches first
            if after is None or (score, -key) < (after.score, -after.key):
                found.append(Found(r, score, key, held.visible))
        found.sort(key=lambda f: (-f.score, f.key))
        return found[:limit]

    def reset(self) -> None:
        self.rows, self.heads, self.reached, self.keys = [], {}, 0, set()

    def count(self) -> int:
        return len(self.rows)


def _admits(where: SearchFilter, r: SearchRow, visible: bool) -> bool:
    return (
        (where.include_hidden or visible)
        and (where.tenant is None or r.tenant == where.tenant)
        and (where.context_hexes is None or r.context_hex in where.context_hexes)
        and (where.roles is None or r.role in where.roles)
        and (where.since is None or r.at >= where.since)
        and (where.until is None or r.at < where.until)
    )


__all__ = [
    "HEADS", "PENDING", "POSITION", "TABLE", "After", "Found", "MemorySearchIndex", "Read",
    "SearchFilter", "SearchIndex", "SearchRow", "sql_filter",
]  # fmt: skip
