"""The persisted audit index: a read model of every event, kept by the library's tracking.

Each backend's view is a tracking recorder of the eventsourcing library: the rows of a page
of events and the position they reach are written in one transaction, so the index never
holds an event twice or skips one. Queries filter by context, type, actor and time and
page by position (the application sequence), through the indexes named below.

Each backend module holds its view. Where one writer at a time commits (SQLite, memory),
an event's notification id is its position. On PostgreSQL appends to different contexts
commit concurrently, so ids may become visible out of order; the view there reads events in
commit-safe order and numbers them itself (postgres_audit.py): either way a reader that has
seen position n will never later find a smaller one.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from eventsourcing.persistence import Notification, TrackingRecorder

from ctxstore.adapters.storage.codec.chain import Row

PositionedRow = tuple[int, str, int, str, bytes]  # position, context hex, version, topic, state
from ctxstore.projections.audit import AuditRow, Revert

TRACKING_NAME = "ctxstore_audit"  # the projection's name in the tracking table

# Each index serves one filter and keeps its rows in position order, so a page is a short
# range scan; (actor, ts) answers "one actor, recent hours" without reading older rows.
INDEXES = {
    "ctxstore_audit_context_idx": "(context_id, position)",
    "ctxstore_audit_context_version_idx": "(context_id, version)",  # a window of versions
    "ctxstore_audit_actor_idx": "(actor, position)",
    "ctxstore_audit_actor_ts_idx": "(actor, ts)",
    "ctxstore_audit_type_idx": "(type, position)",
    "ctxstore_audit_ts_idx": "(ts)",
}
# Added with tenants: created after the column, which older tables gain by ALTER TABLE.
TENANT_INDEX = ("ctxstore_audit_tenant_idx", "(tenant, position)")


@dataclass(frozen=True)
class Unindexed:
    """Events the index has not seen yet, each with the position it gets, and the mark a
    backend keeps with the position reached (PostgreSQL: where in the commit order)."""

    entries: list[tuple[int, Notification]]
    mark: Any = None


@dataclass(frozen=True)
class AuditFilter:
    """What an audit query asks for; None means any."""

    context_id: UUID | None = None
    types: Sequence[str] | None = None
    actor: str | None = None
    tenant: str | None = None  # only the contexts of this tenant
    since: int | None = None  # microseconds since the epoch, inclusive
    until: int | None = None  # exclusive
    from_version: int | None = None  # with context_id: versions from, inclusive
    to_version: int | None = None  # inclusive


class AuditView(TrackingRecorder, ABC):
    """The audit index of one store. With keys per context its rows are sealed on the way
    in and opened on the way out (adapters/keys/audit_seal.py)."""

    sealer: Any = None  # AuditSealer, set by the storage when the store encrypts

    def sealed(self, rows: Sequence[AuditRow]) -> list[AuditRow]:
        return list(rows) if self.sealer is None else [self.sealer.seal(r) for r in rows]

    def opened(self, found: list[tuple[AuditRow, int | None]]) -> list[tuple[AuditRow, int | None]]:
        if self.sealer is None:
            return found
        return [(self.sealer.open(r), by) for r, by in found]

    def hidden(self, where: AuditFilter) -> AuditFilter:
        """The filter as the stored rows spell its values."""
        return where if self.sealer is None else self.sealer.where(where)

    def hidden_tenant(self, tenant: str | None) -> str | None:
        """A tenant as the rows spell it (a keyed hash when sealed)."""
        if tenant is None or self.sealer is None:
            return tenant
        return self.sealer.hashed(tenant)  # type: ignore[no-any-return]

    def last_writes(self) -> list[tuple[str, int, str | None, int]]:
        """(context hex, newest event's time in microseconds, tenant as stored, newest
        version) of every context in the index."""
        return []

    def has_plain_rows(self) -> bool:
        """Whether any row was indexed without sealing (before the store encrypted)."""
        return False

    def unindexed(self, recorder: Any, position: int, limit: int) -> Unindexed:
        """Events after `position`, in the order the index takes them: here notification
        ids, which commit in order where one writer at a time commits."""
        found = recorder.select_notifications(position + 1, limit)
        return Unindexed([(n.id, n) for n in found])

    @abstractmethod
    def project(
        self, rows: Sequence[AuditRow], reverts: Sequence[Revert], upto: int, mark: Any,
        ids: Sequence[int],
    ) -> None:  # fmt: skip
        """Store rows and rollback marks, and the position reached (with the backend's mark
        of it, from `unindexed`; None where the backend has none), in one transaction.
        `ids`: the rows' events' notification ids; a row whose event is gone (erased, or its
        history removed, since the page was read) is not stored.

        Raises the library's IntegrityError when another process got there first.
        """

    @abstractmethod
    def query(
        self, where: AuditFilter, after: int, limit: int
    ) -> list[tuple[AuditRow, int | None]]:
        """Rows after a position, in position order, each with the version that reverted it."""

    def create_table(self) -> None:
        """Create the index's tables if missing (the library's tracking table with them)."""

    def position(self) -> int:
        return self.max_tracking_id(TRACKING_NAME) or 0

    def needs_rebuild(self) -> bool:
        """Whether the rows disagree with the position tracked: the table was dropped or
        truncated, its newest rows deleted, or the tracking record moved (three index
        lookups).

        Rows that outlive their events are not damage: they are how `verify` names newest
        events deleted behind the store's back, so they are kept. (An erased context loses
        its events and its rows alike.)
        """
        tracked = self.position()
        found = self._newest(tracked)
        newest_row, newest_event, newest_stored = (v or 0 for v in found)
        rows_missing = newest_row < newest_event
        tracking_behind = newest_row > tracked
        tracking_ahead = tracked > newest_stored and newest_row <= newest_stored
        return rows_missing or tracking_behind or tracking_ahead

    def _newest(self, tracked: int) -> tuple[int | None, int | None, int | None]:
        """The newest row's position, and the newest stored event's, up to `tracked` and
        of all."""
        return None, None, None

    def reset(self) -> None:
        """Forget every row and the position reached: the next catch-up rebuilds from events."""

    @abstractmethod
    def event_rows(self, after: int, limit: int) -> list[PositionedRow]:
        """Stored events after a position, raw: (position, context hex, version, topic, state)."""

    @abstractmethod
    def context_rows(self, context_hex: str, after_version: int, limit: int) -> list[Row]:
        """One context's stored events after a version, raw, in version order."""

    @abstractmethod
    def indexed_heads(self, context_hex: str | None = None) -> dict[str, int]:
        """The newest version the index has seen of each context (or of one)."""


# Each scalar bound of a filter: its field and the condition it puts on a column.
_BOUNDS = (
    ("actor", "actor = {}"),
    ("tenant", "tenant = {}"),
    ("since", "ts >= {}"),
    ("until", "ts < {}"),
    ("from_version", "version >= {}"),
    ("to_version", "version <= {}"),
)


def sql_filter(where: AuditFilter, mark: str) -> tuple[str, list[Any]]:
    """The WHERE clause (after `position > ?`) and its parameters, in one placeholder style."""
    clauses: list[str] = []
    params: list[Any] = []
    if where.context_id is not None:
        clauses.append(f"context_id = {mark}")
        params.append(where.context_id.hex)
    if where.types:
        clauses.append("type IN (" + ", ".join([mark] * len(where.types)) + ")")
        params.extend(where.types)
    for name, condition in _BOUNDS:
        value = getattr(where, name)
        if value is not None:
            clauses.append(condition.format(mark))
            params.append(value)
    return "".join(" AND " + c for c in clauses), params


COLUMNS = "position, context_id, version, type, actor, ts, batch, facts, tenant, reverted_by"


def audit_row(r: Sequence[Any]) -> tuple[AuditRow, int | None]:
    return AuditRow(r[0], UUID(r[1]), r[2], r[3], r[4], r[5], r[6], r[7], r[8]), r[9]


def audit_params(r: AuditRow) -> tuple[Any, ...]:
    return (
        r.position, r.context_id.hex, r.version, r.type, r.actor, r.timestamp, r.batch, r.facts,
        r.tenant,
    )  # fmt: skip


def matches(r: AuditRow, w: AuditFilter) -> bool:
    return (
        (w.context_id is None or r.context_id == w.context_id)
        and (not w.types or r.type in w.types)
        and (w.actor is None or r.actor == w.actor)
        and (w.tenant is None or r.tenant == w.tenant)
        and (w.since is None or r.timestamp >= w.since)
        and (w.until is None or r.timestamp < w.until)
        and (w.from_version is None or r.version >= w.from_version)
        and (w.to_version is None or r.version <= w.to_version)
    )


__all__ = [
    "AuditFilter",
    "AuditView",
    "Unindexed",
    "audit_params",
    "audit_row",
    "matches",
    "sql_filter",
]
