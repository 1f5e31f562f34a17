"""memory://: a store that lives as long as its process (tests, demos, notebooks).

Its database is this backend's: the recorders (memory_recorder.py), the audit index, the
idempotency keys and the erasure records, one set per store. Erasure removes a context from
each of them at once; the process's memory being the store's only copy, nothing is left.
"""

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
from ctxstore.adapters.storage.erasers import Eraser, Erasure
from ctxstore.adapters.storage.idempotency import Claimed, IdempotencyKeys
from ctxstore.adapters.storage.memory_recorder import MemoryEventsRecorder, MemorySnapshotsRecorder
from ctxstore.adapters.storage.migrations import Migration
from ctxstore.adapters.storage.search_index import MemorySearchIndex, SearchIndex
from ctxstore.adapters.storage.turns import Turns
from ctxstore.projections.audit import AuditRow, Revert


def hex_of(originator_id: UUID | str) -> str:
    """A stored event's context id as the index spells it (the library types it either way)."""
    return originator_id.hex if isinstance(originator_id, UUID) else UUID(originator_id).hex


class MemoryAuditView(POPOTrackingRecorder, AuditView):
    """The audit index of a memory:// store, as a list."""

    def __init__(self, recorder: MemoryEventsRecorder) -> None:
        super().__init__()
        self.recorder = recorder
        self._rows: list[AuditRow] = []
        self._reverted: dict[tuple[UUID, int], int] = {}
        self._rows_lock = threading.Lock()

    def event_rows(self, after: int, limit: int) -> list[PositionedRow]:
        found = self.recorder.select_notifications(after + 1, limit)
        return [
            (n.id, hex_of(n.originator_id), n.originator_version, n.topic, n.state) for n in found
        ]

    def context_rows(self, context_hex: str, after_version: int, limit: int) -> list[Row]:
        found = self.recorder.select_events(UUID(context_hex), gt=after_version, limit=limit)
        return [(hex_of(s.originator_id), s.originator_version, s.topic, s.state) for s in found]

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
        # The events' lock first, as an erasure takes them: one erased since the page was
        # read has emptied its events' places, and its rows are not stored.
        with self.recorder.lock, self._rows_lock:
            self.insert_tracking(Tracking(TRACKING_NAME, upto))  # raises if not ahead
            kept = [r for r, n in zip(rows, ids, strict=True) if self.recorder.holds(n)]
            erased = {r.context_id for r in rows} - {r.context_id for r in kept}
            self._rows.extend(kept)
            for rv in reverts:
                if rv.context_id in erased:
                    continue
                for v in range(rv.from_version, rv.by):
                    self._reverted.setdefault((rv.context_id, v), rv.by)

    def forget(self, cid: UUID) -> None:
        """Delete a context's rows and rollback marks (its erasure)."""
        with self._rows_lock:
            self._rows = [r for r in self._rows if r.context_id != cid]
            self._reverted = {k: by for k, by in self._reverted.items() if k[0] != cid}

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


class KeyRows:
    """The idempotency keys of one memory:// store, shared by every MemoryIdempotencyKeys
    it gives out: (tenant, key) -> (what holds it, when, the context its request names)."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], tuple[Claimed, float, str | None]] = {}
        self.lock = threading.Lock()

    def forget(self, cid: UUID) -> None:
        """Delete the stored responses of requests about a context (its erasure)."""
        with self.lock:
            for k in [k for k, (_, _, about) in self.rows.items() if names(about, cid)]:
                del self.rows[k]


def names(context: str | None, cid: UUID) -> bool:
    """Whether a request's path names the context (in any spelling of its id)."""
    try:
        return context is not None and UUID(context) == cid
    except ValueError:
        return False


class MemoryIdempotencyKeys(IdempotencyKeys):
    """For a memory:// store: keys live as long as the store."""

    def __init__(self, ttl: float, pending: float, table: KeyRows) -> None:
        super().__init__(ttl, pending)
        self._table = table

    def claim(
        self, tenant: str, key: str, fingerprint: str, context: str | None = None
    ) -> Claimed | None:
        done_before, pending_before = self._expired_before()
        with self._table.lock:
            found = self._table.rows.get((tenant, key))
            if found is not None:
                held, created, _ = found
                if created >= (pending_before if held.status is None else done_before):
                    return held
            self._table.rows[tenant, key] = (Claimed(fingerprint, None, None), time.time(), context)
            return None

    def complete(self, tenant: str, key: str, status: int, body: bytes) -> None:
        with self._table.lock:
            found = self._table.rows.get((tenant, key))
            if found is None:  # its context was erased while the request ran
                return
            done = Claimed(found[0].fingerprint, status, body)
            self._table.rows[tenant, key] = (done, time.time(), found[2])

    def release(self, tenant: str, key: str) -> None:
        with self._table.lock:
            found = self._table.rows.get((tenant, key))
            if found is not None and found[0].status is None:
                del self._table.rows[tenant, key]


class MemoryEraser(Eraser):
    """Erases a context from one memory:// store's structures. The events' lock is held
    throughout, so no append or audit page comes in between; nothing remains to clean up
    after (no file, no log, no copy), so its record names no residue but crypto-shredding's."""

    def __init__(
        self, events: MemoryEventsRecorder, snapshots: MemorySnapshotsRecorder,
        audit: MemoryAuditView | None, keys: KeyRows, search: MemorySearchIndex | None = None,
    ) -> None:  # fmt: skip
        self.events, self.snapshots, self.audit, self.keys = events, snapshots, audit, keys
        self.search = search

    def erase(self, record: Erasure) -> Erasure:
        cid = record.context_id
        with self.events.lock:
            events = self.events.erase(cid)
            snapshots = self.snapshots.erase(cid)
            if self.audit is not None:
                self.audit.forget(cid)
            if self.search is not None:
                self.search.forget(cid.hex)
            self.keys.forget(cid)
            done = record.model_copy(update={"events": events, "snapshots": snapshots})
            self.events.keep(done)
        return done

    def _set_residue(self, done: Erasure, residue: list[str]) -> None:
        with self.events.lock:
            self.events.erasures = [
                r.model_copy(update={"residue": residue}) if r == done else r
                for r in self.events.erasures
            ]

    def records(self) -> list[Erasure]:
        with self.events.lock:
            return list(self.events.erasures)


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
        self._audit: MemoryAuditView | None = None  # the store's, once made
        self._search: MemorySearchIndex | None = None
        self._keys = KeyRows()

    def configure(self, factory: Any) -> None:
        # The library's in-memory factory names its recorders' classes in code (no setting
        # chooses others): it is told to make these, from which a context can be erased.
        factory.application_recorder = MemoryEventsRecorder
        factory.aggregate_recorder = lambda purpose="events": MemorySnapshotsRecorder()

    def schema_version(self) -> int | None:
        return self._version

    def record_version(self, migration: Migration) -> None:
        self._version = migration.version

    def audit_view(self, recorder: Any) -> AuditView:
        self._audit = MemoryAuditView(recorder)
        return self._audit

    def search_index(self, recorder: Any) -> SearchIndex:
        # Rows stored under the events' lock, and only while the context has events: an
        # erasure (which forgets them under the same lock) never leaves any behind.
        self._search = MemorySearchIndex(
            guard=recorder.lock,
            exists=lambda hex_id: bool(recorder.select_events(UUID(hex_id), limit=1)),
        )
        return self._search

    def eraser(self, recorder: Any, snapshots: Any) -> Eraser:
        return MemoryEraser(recorder, snapshots, self._audit, self._keys, self._search)

    def erasures_of(self, recorder: Any, cid: UUID) -> int:
        return int(recorder.erasures_of(cid))

    def events_after(self, recorder: Any, cid: UUID, gt: int) -> tuple[Sequence[Any], int]:
        found: tuple[Sequence[Any], int] = recorder.select_after(cid, gt)
        return found

    def idempotency_keys(
        self, recorder: Any, ttl: float, pending: float, cipher: Any
    ) -> IdempotencyKeys:
        return MemoryIdempotencyKeys(ttl, pending, self._keys)

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
