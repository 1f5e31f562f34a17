"""What ContextStore offers over its keys (adapters/keys/): where they are, and rotation."""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel, ConfigDict

from ctxstore.adapters.keys.cipher import DataKeys
from ctxstore.adapters.keys.rotation import BATCH, KekRotation, rotate_kek
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

    def _data_keys(self) -> DataKeys:
        keys = self._core.storage.keys
        if keys is None:
            raise InvalidOperationError(
                "this store is not encrypted: set CTXSTORE_ENCRYPTION_KEY, CTXSTORE_KEY_FILE "
                "or CTXSTORE_KMS"
            )
        return keys.keys

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
