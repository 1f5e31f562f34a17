"""The audit log across contexts: one row per event, in the order events were recorded.

Rows are what the persisted audit index stores (adapters/storage/audit_index.py); a rollback marks
the rows it reverted. Pure: the adapter feeds it decoded events and their positions.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, NamedTuple
from uuid import UUID

from pydantic import BaseModel, ConfigDict

from ctxstore.domain.context import Context
from ctxstore.domain.limits import column_text
from ctxstore.projections.history import EVENT_TYPES, describe_event

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_micros(t: datetime) -> int:
    """Microseconds since the epoch of a timezone-aware time (the index's time column)."""
    delta = t - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_micros(us: int) -> datetime:
    return datetime.fromtimestamp(us // 1_000_000, UTC).replace(microsecond=us % 1_000_000)


class AuditRow(NamedTuple):
    """One event as the audit index stores it."""

    position: int  # the event's place in the application sequence (notification id)
    context_id: UUID
    version: int
    type: str
    actor: str
    timestamp: int  # microseconds since the epoch
    batch: int
    facts: str  # JSON: {"message_ids": [...], "details": {...}}
    tenant: str | None = None  # the context's owner on a shared service


class Revert(NamedTuple):
    """A rollback at version `by` undid the context's versions from_version..by-1."""

    context_id: UUID
    from_version: int
    by: int


class AuditEntry(BaseModel):
    """One event as an auditor reads it: who changed which context, how, and when."""

    model_config = ConfigDict(frozen=True)

    position: int  # pass the last one back as `after` to read on (the cursor)
    context_id: UUID
    version: int
    timestamp: datetime
    type: str
    actor: str
    batch: int
    reverted: bool
    reverted_by: int | None
    message_ids: list[str]
    details: dict[str, Any]


class AuditPage(BaseModel):
    """A page of audit entries and the cursor to read the next one (or to follow new events)."""

    model_config = ConfigDict(frozen=True)

    entries: list[AuditEntry]
    # Position of the last entry, or the `after` given when the page is empty; over shards,
    # the merged cursor (text): pass it back as `after`.
    cursor: int | str
    more: bool  # a full page: more entries may follow right away


def audit_row(event: Context.Event, position: int, tenant: str | None = None) -> AuditRow:
    """The audit row of one stored event of a context owned by `tenant`."""
    batch, ids, details = describe_event(event)
    return AuditRow(
        position=position,
        context_id=event.originator_id,
        version=event.originator_version,
        type=EVENT_TYPES[type(event).__name__],
        actor=column_text(str(getattr(event, "actor", ""))),
        timestamp=to_micros(event.timestamp),
        batch=batch,
        facts=column_text(json.dumps({"message_ids": ids, "details": details}, ensure_ascii=False)),
        tenant=None if tenant is None else column_text(tenant),
    )


def revert_of(event: Context.Event) -> Revert | None:
    """The versions a rollback event undid, if it is one."""
    if isinstance(event, Context.BatchEnded) and event.reverts_from is not None:
        return Revert(event.originator_id, event.reverts_from, event.originator_version)
    return None


def audit_entry(row: AuditRow, reverted_by: int | None) -> AuditEntry:
    """The entry an auditor reads, from a stored row."""
    facts = json.loads(row.facts)
    return AuditEntry(
        position=row.position,
        context_id=row.context_id,
        version=row.version,
        timestamp=from_micros(row.timestamp),
        type=row.type,
        actor=row.actor,
        batch=row.batch,
        reverted=reverted_by is not None,
        reverted_by=reverted_by,
        message_ids=facts["message_ids"],
        details=facts["details"],
    )
