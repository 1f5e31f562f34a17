"""Lexical relevance: what the semantic and adaptive prompt strategies measure a message's
relevance with when no similarity function is given (word sets, Chinese by character
bigrams, common words left out)."""

from __future__ import annotations

import re
from functools import lru_cache

# words too common to say what a message is about, English and Chinese
STOP_WORDS = frozenset(
    [
        "the",
        "a",
        "an",
        "and",
        "or",
        "but",
        "in",
        "on",
        "at",
        "to",
        "for",
        "of",
        "with",
        "by",
        "is",
        "are",
        "was",
        "were",
        "be",
        "it",
        "this",
        "that",
        "i",
        "you",
        "we",
        "的",
        "是",
        "在",
        "和",
        "或",
        "但是",
        "如果",
        "那么",
    ]
)


def lexical_similarity(a: str, b: str) -> float:
    """Jaccard similarity of word sets (the lexical baseline); CJK text by character bigrams."""
    wa, wb = _words(a), _words(b)
    if not wa or not wb:
        return 0.0
    return len(wa & wb) / len(wa | wb)


@lru_cache(maxsize=65536)
def mentions(text: str, keywords: tuple[str, ...]) -> bool:
    """Whether the text mentions any of the keywords (case-insensitive)."""
    low = text.lower()
    return any(k in low for k in keywords)


@lru_cache(maxsize=65536)
def _words(text: str) -> frozenset[str]:
    words: set[str] = set()
    for token in re.findall(r"[\u4e00-\u9fff]+|[\w']+", text.lower()):
        if re.match(r"[\u4e00-\u9fff]", token):
            words.update(token[i : i + 2] for i in range(max(1, len(token) - 1)))
        elif token not in STOP_WORDS:
            words.add(token)
    return frozenset(words - STOP_WORDS)
