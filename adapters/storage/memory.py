"""memory://: a store that lives as long as its process (tests, demos, notebooks)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import Tracking
from eventsourcing.popo import POPOTrackingRecorder

from ctxstore.adapters.storage.audit_index import (
    TRACKING_NAME,
    AuditFilter,
    AuditView,
    PositionedRow,
    matches,
)
from ctxstore.adapters.storage.backend import Backend
from ctxstore.adapters.storage.blobs import BlobRows, MemoryBlobRows
from ctxstore.adapters.storage.codec.chain import Row
from ctxstore.adapters.storage.erasers import Eraser
from ctxstore.adapters.storage.idempotency import Claimed, IdempotencyKeys
from ctxstore.adapters.storage.migrations import Migration
from ctxstore.adapters.storage.turns import Turns
from ctxstore.domain.errors import InvalidOperationError
from ctxstore.projections.audit import AuditRow, Revert


class MemoryAuditView(POPOTrackingRecorder, AuditView):
    """The audit index of a memory:// store, as a list."""

    def __init__(self, recorder: Any) -> None:
        super().__init__()
        self.recorder = recorder
        self._rows: list[AuditRow] = []
        self._reverted: dict[tuple[UUID, int], int] = {}
        self._rows_lock = threading.Lock()

    def event_rows(self, after: int, limit: int) -> list[PositionedRow]:
        found = self.recorder.select_notifications(after + 1, limit)
        return [(n.id, n.originator_id.hex, n.originator_version, n.topic, n.state) for n in found]

    def context_rows(self, context_hex: str, after_version: int, limit: int) -> list[Row]:
        found = self.recorder.select_events(UUID(context_hex), gt=after_version, limit=limit)
        return [(s.originator_id.hex, s.originator_version, s.topic, s.state) for s in found]

    def indexed_heads(self, context_hex: str | None = None) -> dict[str, int]:
        heads: dict[str, int] = {}
        with self._rows_lock:
            for r in self._rows:
                if context_hex is None or r.context_id.hex == context_hex:
                    heads[r.context_id.hex] = max(heads.get(r.context_id.hex, 0), r.version)
        return heads

    def project(
        self, rows: Sequence[AuditRow], reverts: Sequence[Revert], upto: int, mark: Any,
        ids: Sequence[int],
    ) -> None:  # fmt: skip
        with self._rows_lock:  # (memory:// erases nothing)
            self.insert_tracking(Tracking(TRACKING_NAME, upto))  # raises if not ahead
            self._rows.extend(rows)
            for rv in reverts:
                for v in range(rv.from_version, rv.by):
                    self._reverted.setdefault((rv.context_id, v), rv.by)

    def query(
        self, where: AuditFilter, after: int, limit: int
    ) -> list[tuple[AuditRow, int | None]]:
        found = []
        with self._rows_lock:
            for r in self._rows:
                if r.position <= after or not matches(r, where):
                    continue
                found.append((r, self._reverted.get((r.context_id, r.version))))
                if len(found) >= limit:
                    break
        return found


class MemoryIdempotencyKeys(IdempotencyKeys):
    """For a memory:// store: keys live as long as the process."""

    def __init__(self, ttl: float, pending: float) -> None:
        super().__init__(ttl, pending)
        self._rows: dict[tuple[str, str], tuple[Claimed, float]] = {}
        self._lock = threading.Lock()

    def claim(
        self, tenant: str, key: str, fingerprint: str, context: str | None = None
    ) -> Claimed | None:
        done_before, pending_before = self._expired_before()
        with self._lock:
            found = self._rows.get((tenant, key))
            if found is not None:
                held, created = found
                if created >= (pending_before if held.status is None else done_before):
                    return held
            self._rows[tenant, key] = (Claimed(fingerprint, None, None), time.time())
            return None

    def complete(self, tenant: str, key: str, status: int, body: bytes) -> None:
        with self._lock:
            held = self._rows[tenant, key][0]
            self._rows[tenant, key] = (Claimed(held.fingerprint, status, body), time.time())

    def release(self, tenant: str, key: str) -> None:
        with self._lock:
            found = self._rows.get((tenant, key))
            if found is not None and found[0].status is None:
                del self._rows[tenant, key]


def _nothing_to_create(backend: Backend, events: Any, snapshots: Any) -> None:
    """Memory holds no tables: the library's structures exist as soon as its recorders do."""


class MemoryBackend(Backend):
    """Everything in this process's memory; snapshots are all kept (nothing to reclaim)."""

    name = "memory"
    migrations = (
        Migration(1, "nothing to create in memory", _nothing_to_create),
        Migration(2, "erasure records say what residue may remain", _nothing_to_create),
        Migration(3, "erasure records name the forks erased with a context", _nothing_to_create),
        Migration(4, "attachments stored once by their hash", _nothing_to_create),
    )

    def __init__(self, env: dict[str, str]) -> None:
        super().__init__(env)
        self._version: int | None = None

    def schema_version(self) -> int | None:
        return self._version

    def record_version(self, migration: Migration) -> None:
        self._version = migration.version

    def audit_view(self, recorder: Any) -> AuditView:
        return MemoryAuditView(recorder)

    def eraser(self, recorder: Any, snapshots: Any) -> Eraser:
        raise InvalidOperationError("erasure needs a SQLite or PostgreSQL store, not memory://")

    def idempotency_keys(
        self, recorder: Any, ttl: float, pending: float, cipher: Any
    ) -> IdempotencyKeys:
        return MemoryIdempotencyKeys(ttl, pending)

    def turns(self, recorder: Any) -> Turns:
        return Turns()

    def blobs(self, recorder: Any, cipher: Any) -> BlobRows:
        return MemoryBlobRows()

    def snapshot_versions(self, snapshots: Any, cid: UUID, *, below: int, limit: int) -> list[int]:
        return []

    def delete_snapshots(self, snapshots: Any, cid: UUID, versions: Sequence[int]) -> None:
        return None

    def event_rows(
        self, recorder: Any, cid: UUID, versions: Sequence[int]
    ) -> Iterable[tuple[int, str, bytes]]:
        if not versions:
            return
        wanted = set(versions)
        for s in recorder.select_events(cid, gt=versions[0] - 1, lte=versions[-1]):
            if s.originator_version in wanted:
                yield s.originator_version, s.topic, s.state
