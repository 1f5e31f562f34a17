"""Stored states sealed with their context's own data key (envelope encryption).

A sealed state is `MAGIC | generation (4 bytes) | nonce (12) | AES-256-GCM ciphertext+tag`,
the context id as associated data: a state moved to another context does not open. States
written before keys per context (the library's AESCipher under the store's one key: nonce,
tag, ciphertext) and states written without encryption still read, so a store can be
encrypted in place (`ctxstore encrypt`) while it serves.

Unwrapped data keys are cached (most recently used first, `CACHE` of them): a cold context
costs one vault read and one unwrap; a new one one wrap and one vault insert.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import threading
import time
from collections import OrderedDict
from uuid import UUID

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ctxstore.adapters.keys.kek import KeyUnavailableError, KeyWrapper
from ctxstore.adapters.keys.vault import KeyVault, WrappedRow

log = logging.getLogger(__name__)

MAGIC = b"\xc7\x78\x01"  # not `{`, zstd's or zlib's first bytes; version 1 of this layout
HEADER = len(MAGIC) + 4
NONCE = 12
CACHE = 100_000
# Seconds a process trusts its cached keys of a context: within this, a re-keying or an
# erasure by another process reaches every cache (re-keying waits this long before it drops
# the old generation).
TTL = 60.0
INDEX_KEY = "store:index"  # hashes the audit index's filter columns
STORE_KEY = "store:data"  # what belongs to no one context (attachments, some responses)


class KeyDestroyedError(ValueError):
    """A state's data key is gone: its context was erased (crypto-shredded)."""


def key_name(owner: UUID | str) -> str:
    return owner.hex if isinstance(owner, UUID) else owner


def _aad(owner: UUID | str) -> bytes:
    return owner.bytes if isinstance(owner, UUID) else owner.encode()


def _wrap_aad(name: str, generation: int) -> bytes:
    return f"ctxstore data key\0{name}\0{generation}".encode()


def first_key_notice(vault: KeyVault) -> str:
    """What an operator must know once a store holds keys: where they are, and what a
    backup needs (said when the vault's first key is made)."""
    if vault.apart:
        return (
            f"this store's data keys are kept in {vault.where}: back it up with the store"
            " (without it the events cannot be read), and keep the KEK apart from both"
        )
    return (
        f"this store's data keys are kept in {vault.where} (table ctxstore_keys): a"
        " backup made before an erasure still opens the erased context with the current KEK"
        " until the KEK is rotated (ctxstore keys rotate); CTXSTORE_KEY_VAULT keeps the"
        " keys apart (docs/explanation/security.md)"
    )


class DataKeys:
    """Data keys by name: created on first use, unwrapped once, cached."""

    def __init__(
        self, kek: KeyWrapper, vault: KeyVault, cache: int = CACHE, ttl: float = TTL
    ) -> None:
        self.kek = kek
        self.vault = vault
        self.ttl = ttl
        self._cache: OrderedDict[str, tuple[float, dict[int, bytes]]] = OrderedDict()
        self._size = cache
        self._lock = threading.Lock()
        self._first_checked = False

    def _cached(self, name: str) -> dict[int, bytes] | None:
        with self._lock:
            found = self._cache.get(name)
            if found is None or time.monotonic() - found[0] > self.ttl:
                return None  # read again: another process may have re-keyed or erased it
            self._cache.move_to_end(name)
            return found[1]

    def _load(self, name: str) -> dict[int, bytes]:
        keys = {
            gen: self.kek.unwrap(kek, wrapped, _wrap_aad(name, gen))
            for _, gen, kek, wrapped in self.vault.rows(name)
        }
        if keys:
            with self._lock:
                self._cache[name] = (time.monotonic(), keys)
                self._cache.move_to_end(name)
                while len(self._cache) > self._size:
                    self._cache.popitem(last=False)
        return keys

    def known(self, name: str) -> bool:
        """Whether the name's keys are cached (using them costs no I/O)."""
        return self._cached(name) is not None

    def generations(self, name: str) -> dict[int, bytes]:
        """A name's keys by generation (empty: it has none, or they were destroyed)."""
        return self.lookup(name)[0]

    def lookup(self, name: str) -> tuple[dict[int, bytes], bool]:
        """A name's keys by generation, and whether they came from this process's cache."""
        found = self._cached(name)
        return (found, True) if found is not None else (self._load(name), False)

    def reloaded(self, name: str) -> dict[int, bytes]:
        """A name's keys read from the vault again, past the cache."""
        self.forget([name])
        return self._load(name)

    def current(self, name: str) -> tuple[int, bytes]:
        """The generation new states are sealed with, and its key; made if there is none."""
        keys = self.generations(name)
        if not keys:
            self.add(name, 1)
            keys = self._load(name)
        gen = max(keys)
        return gen, keys[gen]

    def add(self, name: str, generation: int) -> None:
        """Make and store a new key generation (if another process has not already)."""
        key = AESGCM.generate_key(256)
        kek, wrapped = self.kek.wrap(key, _wrap_aad(name, generation))
        if self.vault.add((name, generation, kek, wrapped)) and not self._first_checked:
            self._first_checked = True
            if sum(self.vault.kek_counts().values()) == 1:
                log.warning(first_key_notice(self.vault))
        self.forget([name])

    def forget(self, names: list[str]) -> None:
        with self._lock:
            for n in names:
                self._cache.pop(n, None)

    def destroy(self, names: list[str]) -> int:
        """Crypto-shred: the names' keys leave the vault and this process."""
        self.forget(names)
        return self.vault.destroy(names)

    def rewrap(self, row: WrappedRow) -> WrappedRow:
        """A vault row wrapped anew under the current KEK."""
        name, gen, kek, wrapped = row
        key = self.kek.unwrap(kek, wrapped, _wrap_aad(name, gen))
        new_kek, new_wrapped = self.kek.wrap(key, _wrap_aad(name, gen))
        return name, gen, new_kek, new_wrapped


class ContextCipher:
    """Seals and opens stored states with their owner's data key."""

    def __init__(self, keys: DataKeys, legacy: list[AESGCM] | None = None) -> None:
        self.keys = keys
        self.legacy = legacy or []
        self._aead: dict[bytes, AESGCM] = {}

    def _aead_of(self, key: bytes) -> AESGCM:
        found = self._aead.get(key)
        if found is None:
            if len(self._aead) > 4096:
                self._aead.clear()
            found = self._aead[key] = AESGCM(key)
        return found

    def encrypt(self, owner: UUID | str, data: bytes) -> bytes:
        gen, key = self.keys.current(key_name(owner))
        nonce = os.urandom(NONCE)
        sealed = self._aead_of(key).encrypt(nonce, data, _aad(owner))
        return MAGIC + gen.to_bytes(4, "big") + nonce + sealed

    def generation(self, data: bytes) -> int | None:
        """The key generation a stored state was sealed with (None: not sealed per context)."""
        if data[: len(MAGIC)] != MAGIC or len(data) < HEADER + NONCE + 16:
            return None
        return int.from_bytes(data[len(MAGIC) : HEADER], "big")

    def decrypt(self, owner: UUID | str, data: bytes) -> bytes:
        gen = self.generation(data)
        if gen is None:
            return self._unsealed(data)
        name = key_name(owner)
        keys, cached = self.keys.lookup(name)
        key = keys.get(gen)
        opened = None if key is None else self._open(key, owner, data)
        if opened is None and cached:
            # A cached key may be stale (within TTL): another process erased the context
            # and made it again under the same id, or re-keyed it. The vault says.
            key = self.keys.reloaded(name).get(gen)
            opened = None if key is None else self._open(key, owner, data)
        if key is None:
            raise KeyDestroyedError(
                f"the data key of {owner} (generation {gen}) is not in the vault: "
                "erased (crypto-shredded), or a vault other than the one it was written with"
            )
        if opened is None:
            raise ValueError(
                f"a stored state of {owner} does not open with its data key (damaged, or moved "
                "from another context)"
            )
        return opened

    def _open(self, key: bytes, owner: UUID | str, data: bytes) -> bytes | None:
        """The state opened with `key`; None when it does not open with it."""
        try:
            return self._aead_of(key).decrypt(
                data[HEADER : HEADER + NONCE], data[HEADER + NONCE :], _aad(owner)
            )
        except InvalidTag:
            return None

    def _unsealed(self, data: bytes) -> bytes:
        """A state from before keys per context: the store's one key, or plain."""
        for aead in self.legacy:
            nonce, tag, body = data[:12], data[12:28], data[28:]
            try:
                return aead.decrypt(nonce, body + tag, None)
            except (InvalidTag, ValueError):
                continue
        return data  # written without encryption: the compressor reads it, or refuses it

    def index_hash(self, value: str) -> str:
        """A keyed hash of a filter value (actor, tenant) for the audit index."""
        _, key = self.keys.current(INDEX_KEY)
        return hmac.new(key, value.encode(), hashlib.sha256).hexdigest()[:32]


__all__ = ["ContextCipher", "DataKeys", "KeyDestroyedError", "KeyUnavailableError", "key_name"]
