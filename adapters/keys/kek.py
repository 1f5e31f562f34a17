"""Key-encryption keys: what wraps every data key. A data key is never stored unwrapped.

`KeyWrapper` is the interface a key management service plugs into (CTXSTORE_KMS names a
factory `module:attribute` called with the settings): `wrap` seals a data key under the
current KEK and says which KEK that was; `unwrap` opens one sealed under any KEK it still
holds. A cloud KMS maps onto it directly (AWS KMS Encrypt/Decrypt with the key id, Google
Cloud KMS encrypt/decrypt, Vault transit); the store caches unwrapped data keys, so the
service is called once per context a process touches, not once per event.

`LocalKeyring` is the implementation shipped: AES-256-GCM (or 128/192) keys from
CTXSTORE_ENCRYPTION_KEY, or from a key file (CTXSTORE_KEY_FILE) of base64 keys one per line,
the first the current one and the others older ones kept to unwrap what rotation has not
re-wrapped yet. A KEK is named by a hash of it (never the key itself).
"""

from __future__ import annotations

import base64
import hashlib
import os
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ctxstore.domain.errors import ConfigurationError

KEY_SIZES = (16, 24, 32)
NONCE = 12


class KeyUnavailableError(ValueError):
    """A wrapped key that no KEK held here opens (another key, or damaged)."""


class KeyWrapper(ABC):
    """Wraps and unwraps data keys under key-encryption keys (a KMS)."""

    @property
    @abstractmethod
    def current_id(self) -> str:
        """The KEK new wraps are made with."""

    @abstractmethod
    def wrap(self, key: bytes, aad: bytes) -> tuple[str, bytes]:
        """`key` sealed under the current KEK, bound to `aad`; and that KEK's id."""

    @abstractmethod
    def unwrap(self, kek_id: str, wrapped: bytes, aad: bytes) -> bytes:
        """The key sealed in `wrapped`; raises KeyUnavailableError when the KEK is not held
        or the seal does not open (damaged, or bound to other `aad`)."""


def kek_id(key: bytes) -> str:
    """A KEK's public name: 16 hex digits of a hash, never the key."""
    return hashlib.sha256(b"ctxstore kek\0" + key).hexdigest()[:16]


def decode_key(text: str, where: str) -> bytes:
    """A key from its base64 text; raises ConfigurationError naming `where` it came from."""
    try:
        key = base64.b64decode(text.strip(), validate=True)
    except ValueError:
        key = b""
    if len(key) not in KEY_SIZES:
        raise ConfigurationError(
            f"{where} must be base64 of 16, 24 or 32 bytes (make one with `ctxstore keygen`)"
        )
    return key


class LocalKeyring(KeyWrapper):
    """KEKs held in this process: the first is current, the others unwrap older wraps."""

    def __init__(self, keys: Sequence[bytes]) -> None:
        if not keys:
            raise ConfigurationError("a keyring needs at least one key")
        self._ids = [kek_id(k) for k in keys]
        self._aead = {i: AESGCM(k) for i, k in zip(self._ids, keys, strict=True)}

    @classmethod
    def from_file(cls, path: Path) -> LocalKeyring:
        """Keys from a file: base64 keys one per line, the current first; `#` comments."""
        try:
            text = path.read_text()
        except OSError as exc:
            raise ConfigurationError(f"cannot read the key file {path}: {exc.strerror}") from None
        lines = [ln.strip() for ln in text.splitlines()]
        keys = [
            decode_key(ln, f"line {n} of the key file {path}")
            for n, ln in enumerate(lines, 1)
            if ln and not ln.startswith("#")
        ]
        if not keys:
            raise ConfigurationError(f"the key file {path} holds no key")
        return cls(keys)

    @property
    def current_id(self) -> str:
        return self._ids[0]

    def wrap(self, key: bytes, aad: bytes) -> tuple[str, bytes]:
        nonce = os.urandom(NONCE)
        return self._ids[0], nonce + self._aead[self._ids[0]].encrypt(nonce, key, aad)

    def unwrap(self, kek_id: str, wrapped: bytes, aad: bytes) -> bytes:
        aead = self._aead.get(kek_id)
        if aead is None:
            raise KeyUnavailableError(
                f"a data key is wrapped by KEK {kek_id}, which this keyring does not hold "
                f"(it holds {', '.join(self._ids)})"
            )
        try:
            return aead.decrypt(wrapped[:NONCE], wrapped[NONCE:], aad)
        except InvalidTag:
            raise KeyUnavailableError(
                f"a data key wrapped by KEK {kek_id} does not open (damaged)"
            ) from None

    def legacy_all(self) -> list[AESGCM]:
        """Each key as the whole store's cipher key (how stores encrypted before keys per
        context; still read)."""
        return [self._aead[i] for i in self._ids]
