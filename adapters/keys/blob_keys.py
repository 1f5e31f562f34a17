"""Attachments sealed with a key of their own, wrapped by each context that refers to them.

An attachment is stored once per tenant by its hash, however many contexts refer to it, so
it cannot be sealed with one context's key. It gets its own random key; each context that
refers to it keeps that key sealed with the context's data key (in its reference row), and
an upload no context refers to yet keeps it sealed with the store's key until one does.
Erasing a context destroys its key: its wrapping of the attachment key opens no more, and
an attachment only it referred to is deleted — in every copy made before, nothing opens
it. An attachment another context still refers to stays readable through that context: it
is that context's content too.

Sealed bytes: `MAGIC | nonce (12) | AES-256-GCM ciphertext+tag`, the tenant and hash as
associated data.
"""

from __future__ import annotations

import base64
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

MAGIC = b"\xc7\x78\x02"  # an attachment under its own key (version 1 of this layout)
NONCE = 12


def new_key() -> bytes:
    return AESGCM.generate_key(256)


def is_sealed(data: bytes) -> bool:
    return data[: len(MAGIC)] == MAGIC


def _aad(tenant: str, sha256: str) -> bytes:
    return f"ctxstore attachment\0{tenant}\0{sha256}".encode()


def seal(key: bytes, tenant: str, sha256: str, data: bytes) -> bytes:
    nonce = os.urandom(NONCE)
    return MAGIC + nonce + AESGCM(key).encrypt(nonce, data, _aad(tenant, sha256))


def open_sealed(key: bytes, tenant: str, sha256: str, data: bytes) -> bytes:
    body = data[len(MAGIC) :]
    try:
        return AESGCM(key).decrypt(body[:NONCE], body[NONCE:], _aad(tenant, sha256))
    except InvalidTag:
        raise ValueError(
            f"attachment sha256:{sha256} does not open with its key (damaged)"
        ) from None


def to_text(wrapped: bytes) -> str:
    return base64.b64encode(wrapped).decode("ascii")


def from_text(text: str) -> bytes:
    return base64.b64decode(text)
