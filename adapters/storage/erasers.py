"""Erasers: delete one context's rows in one transaction and keep the erasure records
(`ctxstore_erasures`), one class per backend; the store's erasure (adapters/store/erasure.py)
says what erasure guarantees."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict

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
