"""The text of a message that search reads, and its form for the full-text engines.

What is searched: a message's texts as a model reads them (domain/tokens.py's
`message_texts`: the content, tool calls' names and arguments, tool results), never its
role, ids, images or attachments. Both engines index the same folded form, so a query finds
the same messages on SQLite and PostgreSQL:

- case folded and, in Latin, Greek and Cyrillic letters, accents removed ("Café" is
  "cafe"); marks that are part of a letter elsewhere (Japanese dakuten) stay;
- Chinese, Japanese and Korean runs, which have no spaces, written as their overlapping
  pairs of characters ("会议记录" is "会议 议记 记录"), so any substring of two or more
  characters is a phrase of pairs; a lone character stays itself.
"""

from __future__ import annotations

import functools
import hashlib
import re
import unicodedata
from typing import Any

from ctxstore.domain.tokens import message_texts

MAX_TEXT = 256 * 1024  # characters of one message searched: a huge tool output's head
FOLDED_BELOW = 0x0530  # Latin, Greek and Cyrillic: the scripts whose accents fold away
# Han, kana, Hangul and their punctuation-free neighbours: scripts written without spaces.
CJK = re.compile(
    "[\u1100-\u11ff\u3040-\u30ff\u31f0-\u31ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff"
    "\ua960-\ua97f\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002fa1f]+"
)
WORD = re.compile(r"[^\W_]+")  # what both engines take as a word: letters and digits


def searchable_text(message: dict[str, Any]) -> str:
    """What search reads of a stored message (as JSON); '' when it holds no text."""
    texts = message_texts(message)[1:]  # (the role first)
    return "\n".join(t for t in texts if isinstance(t, str) and t)[:MAX_TEXT]


def digest(text: str) -> str:
    """A short fingerprint of a text: which stored row a message's current text is."""
    return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


def fold(text: str) -> str:
    """The text case folded, accents removed from letters of the folded scripts."""
    normal = unicodedata.normalize("NFKC", text).casefold()
    if normal.isascii():
        return normal
    return "".join(map(fold_char, normal))


@functools.lru_cache(maxsize=65536)
def fold_char(ch: str) -> str:
    """One character folded (a letter of a folded script loses its accents; ß is ss)."""
    ch = unicodedata.normalize("NFKC", ch).casefold()
    if len(ch) == 1 and (ord(ch) < FOLDED_BELOW or _latin_like(ch)):
        return "".join(c for c in unicodedata.normalize("NFKD", ch) if not _mark(c))
    if len(ch) > 1:  # (ß, ligatures: each of what it folded to)
        return "".join(map(fold_char, ch))
    return ch


def _latin_like(ch: str) -> bool:
    base = unicodedata.normalize("NFKD", ch)[:1]
    return bool(base) and ord(base) < FOLDED_BELOW


def _mark(ch: str) -> bool:
    return unicodedata.category(ch) == "Mn"


def pairs(run: str) -> list[str]:
    """A run of CJK characters as its overlapping pairs (a lone character: itself)."""
    if len(run) < 2:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def index_form(text: str) -> str:
    """The folded text with each CJK run as its pairs: what the engines index."""
    return CJK.sub(lambda m: " " + " ".join(pairs(m.group())) + " ", fold(text))


def words(text: str) -> list[str]:
    """The words of a folded text as the engines split it (CJK runs as their pairs)."""
    return WORD.findall(index_form(text))


__all__ = ["digest", "fold", "index_form", "pairs", "searchable_text", "words"]
