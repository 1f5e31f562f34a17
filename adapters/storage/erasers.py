"""Erasers: delete one context's rows in one transaction and keep the erasure records
(`ctxstore_erasures`), one class per backend; the store's erasure (adapters/store/erasure.py)
says what erasure guarantees."""

from __future__ import annotations

import json
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict

log = logging.getLogger(__name__)
TABLE = "ctxstore_erasures"
COLUMNS = "context_id, tenant, erased_at, actor, reason, events, snapshots, residue, forks"


class Erasure(BaseModel):
    """The record an erasure leaves: what was erased, by whom and why; never what it held."""

    model_config = ConfigDict(frozen=True)

    context_id: UUID
    tenant: str | None
    erased_at: datetime
    actor: str
    reason: str
    events: int  # rows deleted
    snapshots: int
    # What may still hold the erased content, and why (empty: nothing this store can see).
    residue: list[str] = []
    # The forks erased with it (they held copies of its messages), each with its own record.
    forks: list[UUID] = []
    # Its data key was destroyed (crypto-shredding): every copy of its rows is unreadable.
    # Not stored: a record read back says so in its residue.
    shredded: bool = False


class Eraser(ABC):
    """Deletes one context's rows in one transaction, and keeps the erasure records."""

    # What the backend's driver raises: a cleanup failing so is logged, not raised.
    driver_errors: tuple[type[BaseException], ...] = ()

    def narrowed(self, done: Erasure, cleanup: Callable[[], list[str]]) -> Erasure:
        """`done` stands once its deletion and record (naming the worst residue) commit:
        run the cleanup (a VACUUM, a checkpoint) and record the residue it leaves. A cleanup
        that fails is logged; the erasure is still reported done, its record as it was."""
        if done.shredded:  # what the rows' leftovers hold is ciphertext without its key
            return done
        try:
            left = cleanup()
            if left != done.residue:
                self._set_residue(done, left)
        except self.driver_errors as exc:
            log.warning("erasure of %s: stored; its cleanup failed: %s", done.context_id, exc)
            return done
        return done.model_copy(update={"residue": left})

    @abstractmethod
    def _set_residue(self, done: Erasure, residue: list[str]) -> None:
        """Replace the residue `done`'s stored record names."""

    @abstractmethod
    def erase(self, record: Erasure) -> Erasure:
        """Delete the context's rows, store the record and return it with the rows deleted
        and what residue may remain."""

    @abstractmethod
    def records(self) -> list[Erasure]:
        """Every erasure, oldest first."""


def erasure_record(row: Any) -> Erasure:
    return Erasure(
        context_id=UUID(row[0]), tenant=row[1],
        erased_at=datetime.fromtimestamp(row[2], UTC), actor=row[3], reason=row[4],
        events=row[5], snapshots=row[6], residue=json.loads(row[7]) if row[7] else [],
        forks=[UUID(f) for f in json.loads(row[8])] if row[8] else [],
    )  # fmt: skip


def forks_json(record: Erasure) -> str | None:
    """The record's forks as stored (None when it has none)."""
    return json.dumps([f.hex for f in record.forks]) if record.forks else None
