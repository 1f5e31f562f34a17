"""What ContextStore offers over its keys (adapters/keys/): where they are, and rotation."""

from __future__ import annotations

from collections.abc import Callable
from uuid import UUID

from pydantic import BaseModel, ConfigDict

from ctxstore.adapters.keys.cipher import ContextCipher, DataKeys
from ctxstore.adapters.keys.reseal import BATCH as RESEAL_BATCH
from ctxstore.adapters.keys.reseal import Resealing, rekey, reseal
from ctxstore.adapters.keys.rotation import BATCH, KekRotation, rotate_kek
from ctxstore.adapters.store import audit
from ctxstore.adapters.store.core import StoreCore
from ctxstore.domain.errors import InvalidOperationError


class KeyStatus(BaseModel):
    """The store's keys: the KEK new wraps use, where data keys live, how many each KEK wraps."""

    model_config = ConfigDict(frozen=True)

    kek: str
    vault: str
    apart: bool  # the vault is outside the events database (its WAL and backups)
    by_kek: dict[str, int]


class KeysSurface:
    _core: StoreCore

    def _cipher(self) -> ContextCipher:
        keys = self._core.storage.keys
        if keys is None:
            raise InvalidOperationError(
                "this store is not encrypted: set CTXSTORE_ENCRYPTION_KEY, CTXSTORE_KEY_FILE "
                "or CTXSTORE_KMS"
            )
        if self._core.storage.backend.name == "memory":
            raise InvalidOperationError("a memory:// store holds nothing at rest")
        return keys

    def _data_keys(self) -> DataKeys:
        return self._cipher().keys

    def encrypt_in_place(
        self, *, batch: int = RESEAL_BATCH, progress: Callable[[int], None] | None = None
    ) -> Resealing:
        """Seal every stored event and snapshot with its context's data key: a store written
        without encryption (or with one store-wide key) becomes encrypted in place. Safe to
        interrupt and to run again; readers and writers go on meanwhile. Raises
        InvalidOperationError when the store has no key."""
        cipher = self._cipher()
        audit.catch_up(self._core)
        contexts = [UUID(h) for h in sorted(self._core.storage.audit_index.indexed_heads())]
        storage = self._core.storage
        done = reseal(storage, cipher, contexts, batch=batch, progress=progress, scrub=False)
        blobs = storage.blobs.seal_all()  # attachments, each under a key of its own
        residue = done.residue
        if done.events or done.snapshots or blobs:  # what the plain states left behind
            residue = storage.backend.scrub(storage.recorder)
        return done.model_copy(update={"attachments": blobs, "residue": residue})

    def rekey(self, context_id: UUID | str, *, wait: float | None = None) -> Resealing:
        """A new data key for a context, its states sealed anew, the old key dropped once
        every process's cache has had `wait` seconds (default CTXSTORE_KEY_CACHE_SECONDS)
        to learn of it. Raises ContextNotFoundError, InvalidOperationError."""
        cipher = self._cipher()
        cid = self._core.id(context_id)
        self._core.tenant_of(cid)  # raises ContextNotFoundError
        return rekey(self._core.storage, cipher, cid, wait=wait)

    def key_status(self) -> KeyStatus:
        """Where the store's keys are; raises InvalidOperationError when it has none."""
        keys = self._data_keys()
        return KeyStatus(
            kek=keys.kek.current_id, vault=keys.vault.where, apart=keys.vault.apart,
            by_kek=keys.vault.kek_counts(),
        )  # fmt: skip

    def rotate_kek(
        self, *, batch: int = BATCH, progress: Callable[[int], None] | None = None
    ) -> KekRotation:
        """Re-wrap every data key under the current KEK, online (adapters/keys/rotation.py);
        raises InvalidOperationError when the store is not encrypted."""
        return rotate_kek(self._data_keys(), batch=batch, progress=progress)
