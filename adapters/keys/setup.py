"""The store's keys from its settings: which KEK wraps, which vault keeps, what cipher seals."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from eventsourcing.utils import resolve_topic

from ctxstore.adapters.keys.cipher import ContextCipher, DataKeys
from ctxstore.adapters.keys.kek import KeyWrapper, LocalKeyring, decode_key
from ctxstore.adapters.keys.vault import KeyVault, PostgresVault, SQLiteVault
from ctxstore.adapters.settings import Settings
from ctxstore.adapters.storage.urls import library_env, redact
from ctxstore.domain.errors import ConfigurationError


def keyring(settings: Settings) -> KeyWrapper | None:
    """The KEK the settings name (a KMS, a key file or one key); None: no encryption."""
    if settings.kms:
        try:
            factory: Callable[[Settings], KeyWrapper] = resolve_topic(settings.kms)
        except Exception as exc:  # noqa: BLE001  # any import failure is a bad setting
            raise ConfigurationError(
                f"CTXSTORE_KMS={settings.kms!r} cannot be loaded: {exc}"
            ) from None
        found = factory(settings)
        if not isinstance(found, KeyWrapper):
            raise ConfigurationError(f"CTXSTORE_KMS={settings.kms!r} did not give a KeyWrapper")
        return found
    if settings.key_file is not None:
        return LocalKeyring.from_file(settings.key_file)
    if settings.encryption_key is not None:
        key = decode_key(settings.encryption_key.get_secret_value(), "CTXSTORE_ENCRYPTION_KEY")
        return LocalKeyring([key])
    return None


def vault_at(url: str) -> KeyVault:
    """A vault kept apart from the store (CTXSTORE_KEY_VAULT)."""
    scheme = urlsplit(url).scheme.lower()
    if scheme == "sqlite":
        env = library_env(url)
        return SQLiteVault(Path(env["SQLITE_DBNAME"]))
    if scheme.split("+")[0] in ("postgresql", "postgres"):
        from ctxstore.adapters.keys.postgres_pool import own_pool

        pool, schema = own_pool(url)
        vault = PostgresVault(
            pool.connection, schema, f"the key vault {redact(url)}", apart=True, create=True
        )
        vault.owned = pool
        return vault
    raise ConfigurationError(
        f"CTXSTORE_KEY_VAULT {redact(url)!r}: use sqlite:///path or postgresql://..."
    )


def context_cipher(
    settings: Settings, default_vault: Callable[[], KeyVault]
) -> ContextCipher | None:
    """The cipher a store seals with, or None when the settings name no key."""
    kek = keyring(settings)
    if kek is None:
        return None
    vault = vault_at(settings.key_vault) if settings.key_vault else default_vault()
    legacy: list[Any] = kek.legacy_all() if isinstance(kek, LocalKeyring) else []
    return ContextCipher(DataKeys(kek, vault, ttl=settings.key_cache_seconds), legacy)


class OwnedCipher:
    """The library's Cipher shape (encrypt/decrypt of bytes) for one owner's key."""

    def __init__(self, cipher: ContextCipher, owner: str) -> None:
        self.cipher = cipher
        self.owner = owner

    def encrypt(self, data: bytes) -> bytes:
        return self.cipher.encrypt(self.owner, data)

    def decrypt(self, data: bytes) -> bytes:
        return self.cipher.decrypt(self.owner, data)
