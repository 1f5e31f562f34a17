"""Audit queries across contexts, and the check of every context's hash chain."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import cast
from uuid import UUID

from eventsourcing.persistence import IntegrityError

from ctxstore.adapters.keys.cipher import KeyDestroyedError
from ctxstore.adapters.storage.audit_index import AuditFilter
from ctxstore.adapters.storage.codec.chain import ChainWalker, Verification
from ctxstore.adapters.storage.sqlite_pool import is_read_only
from ctxstore.adapters.store.core import StoreCore
from ctxstore.domain.context import Context
from ctxstore.domain.errors import ContextNotFoundError, IndexBehindError, InvalidOperationError
from ctxstore.domain.limits import check_text, strict_int
from ctxstore.projections.audit import AuditPage, audit_entry, audit_row, revert_of, to_micros
from ctxstore.projections.history import event_type_filter

PROJECT_PAGE = 1000  # events projected per transaction
VERIFY_PAGE = 5000  # events read per query while verifying
MAX_PAGE = 1000  # the largest audit page a caller may ask for


def read_only(core: StoreCore) -> str:
    """Why the store can only be read ("": it can be written)."""
    datastore = getattr(core.storage.recorder, "datastore", None)
    pool = getattr(datastore, "pool", None)
    return pool.read_only if pool is not None and is_read_only(pool) else ""


def behind(core: StoreCore, index: str) -> IndexBehindError:
    return IndexBehindError(
        f"the {index} index is behind the store's events and the store is read-only (as "
        f"{read_only(core)}): open it once where it can be written, which brings the index "
        "up to date, or copy it somewhere writable"
    )


def catch_up(core: StoreCore) -> int:
    """Bring the audit index up to the newest event; returns the position reached. On a
    store that can only be read, an index behind raises IndexBehindError."""
    view = core.storage.audit_index
    position = view.position()
    while True:
        try:
            reached = _index_page(core, position)
        except IntegrityError:
            # Another process indexed this page first: go on from where it got to.
            reached = view.position()
            if reached <= position:
                raise
        if reached == position:
            return position
        position = reached


def _index_page(core: StoreCore, position: int) -> int:
    """Index the next page of events after `position`; the position reached."""
    view = core.storage.audit_index
    page = view.unindexed(core.storage.recorder, position, PROJECT_PAGE)
    if not page.entries:
        return position
    if read_only(core):
        raise behind(core, "audit")
    rows, reverts, ids = [], [], []
    shredded: set[UUID] = set()  # erased since the page was read: asked once a context
    for at, n in page.entries:
        cid = core.id(n.originator_id)
        if cid in shredded:
            continue
        try:
            event = cast(Context.Event, core.storage.mapper.to_domain_event(n))
        except KeyDestroyedError:
            if core.exists(cid):
                raise  # a vault other than the store's: not an erasure
            shredded.add(cid)
            continue  # crypto-shredded since the page was read: nothing of it is indexed
        if isinstance(event, Context.ContextCreated):
            tenant = core.cache.remember_tenant(event.originator_id, event.tenant)
        else:
            try:
                tenant = core.tenant_of(event.originator_id)
            except ContextNotFoundError:
                tenant = None  # erased since the page was read: project() drops its row
        rows.append(audit_row(event, at, tenant))
        ids.append(n.id)
        rv = revert_of(event)
        if rv is not None:
            reverts.append(rv)
    reached = page.entries[-1][0]
    view.project(rows, reverts, reached, page.mark, ids)
    return reached


def time_bound(value: datetime | None, name: str) -> int | None:
    """A time bound of a query as microseconds; raises InvalidOperationError for a time
    without a timezone."""
    if value is None:
        return None
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise InvalidOperationError(
            f"{name} must be a time with a timezone (e.g. 2026-01-01T00:00:00+00:00), got {value!r}"
        )
    return to_micros(value)


def audit_page(
    core: StoreCore,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    types: Sequence[str] | None = None,
    actor: str | None = None,
    context_id: UUID | str | None = None,
    tenant: str | None = None,
    after: int | str = 0,
    limit: int = 100,
    from_version: int | None = None,
    to_version: int | None = None,
    index: bool = True,
) -> AuditPage:
    """Events across contexts after position `after`, in the order recorded, filtered.
    Without `index`, the index is read as it is (a replica's: the primary indexed it)."""
    wanted = event_type_filter(types)
    if not strict_int(after) or after < 0:
        raise InvalidOperationError(f"after must be a position >= 0, got {after!r}")
    if not strict_int(limit) or not 1 <= limit <= MAX_PAGE:
        raise InvalidOperationError(f"limit must be between 1 and {MAX_PAGE}, got {limit!r}")
    for name, value in (("actor", actor), ("tenant", tenant)):
        check_text(value, f"the {name} filter")
    for name, bound in (("from_version", from_version), ("to_version", to_version)):
        if bound is not None and (not strict_int(bound)):
            raise InvalidOperationError(f"{name} must be an integer, got {bound!r}")
        if bound is not None and context_id is None:
            raise InvalidOperationError(f"{name} needs context_id: versions are per context")
    where = AuditFilter(
        context_id=None if context_id is None else core.id(context_id),
        types=wanted or None,
        actor=actor,
        tenant=tenant,
        since=time_bound(since, "since"),
        until=time_bound(until, "until"),
        from_version=from_version,
        to_version=to_version,
    )
    if index:
        catch_up(core)
    found = core.storage.audit_index.query(where, after, limit)
    entries = [audit_entry(row, reverted_by) for row, reverted_by in found]
    return AuditPage(
        entries=entries,
        cursor=entries[-1].position if entries else after,
        more=len(entries) == limit,
    )


def check_attachments(core: StoreCore, w: ChainWalker) -> None:
    """The attachments a context's events refer to are stored and hash to their names:
    the chain covers each reference, the reference names the bytes' sha256."""
    tenant = core.tenant_of(UUID(w.context_hex))
    for sha, version in sorted(w.attachments.items(), key=lambda kv: kv[1]):
        found = core.storage.blobs.fetch(tenant, sha)
        if found is None or hashlib.sha256(found.data).hexdigest() != sha:
            state = "is missing" if found is None else "does not match its sha256 (altered)"
            w.fail(version, f"attachment sha256:{sha} {state}")
            return


def verify(core: StoreCore, context_id: UUID | str | None = None) -> Verification:
    """Check the hash chains of one context or of all; names the first broken link of each.

    A broken link is looked at again, that context alone: a context erased while the walk
    ran (its key destroyed, its rows and attachments deleted) breaks no chain and is left
    out, as is one whose older events a retention policy removed meanwhile; a chain still
    broken on the second look is reported.
    """
    started = time.perf_counter()
    only = None if context_id is None else core.id(context_id).hex
    walkers, events = _walk(core, only)
    if only is not None and events == 0 and not walkers[only].broken:
        core.require(UUID(only))  # raises ContextNotFoundError
    for hex_id in [h for h, w in walkers.items() if w.broken is not None]:
        # A second look, that context alone. Still broken: reported (rows deleted behind
        # the store's back leave the index's versions). Whole now, it exists: the first
        # look met a change under way. Whole and gone: erased while the walk ran.
        try:
            again = _walk(core, hex_id)[0].get(hex_id)
        except ContextNotFoundError:
            again = None
        if again is not None and (again.broken is not None or core.exists(UUID(hex_id))):
            walkers[hex_id] = again
        elif only is not None:
            raise ContextNotFoundError(f"no context with id {UUID(hex_id)}")
        else:
            del walkers[hex_id]
    broken = [w.broken for w in walkers.values() if w.broken is not None]
    return Verification(
        contexts=len(walkers),
        events=events,
        unchained=sum(w.unchained for w in walkers.values()),
        broken=broken,
        seconds=time.perf_counter() - started,
    )


def _walk(core: StoreCore, only: str | None) -> tuple[dict[str, ChainWalker], int]:
    """Each context's walker over its events (`only`: that context's), with the gaps the
    audit index knows of and the attachments checked; and the events read."""
    mapper = core.storage.mapper
    view = core.storage.audit_index
    walkers: dict[str, ChainWalker] = {}
    retention = core.storage.retention
    origins = {} if retention is None else retention.checkpoints(only)

    def walker(hex_id: str) -> ChainWalker:
        if hex_id not in walkers:
            cp = origins.get(hex_id)
            origin = None
            if cp is not None:
                origin = (cp.version, cp.chain, core.bounds.valid(UUID(hex_id), cp))
            walkers[hex_id] = ChainWalker(hex_id, mapper, origin)
        return walkers[hex_id]

    events = 0
    if only is not None:
        w = walker(only)
        while w.broken is None and (rows := view.context_rows(only, w.version, VERIFY_PAGE)):
            for _, version, topic, state in rows:
                w.check(version, topic, state)
            events += len(rows)
    else:
        # The next page is read while this one is hashed: the database works meanwhile.
        with ThreadPoolExecutor(max_workers=1) as reader:
            pending = reader.submit(view.event_rows, 0, VERIFY_PAGE)
            while page := pending.result():
                pending = reader.submit(view.event_rows, page[-1][0], VERIFY_PAGE)
                for _, hex_id, version, topic, state in page:
                    walker(hex_id).check(version, topic, state)
                events += len(page)
    # The audit index remembers the versions it has seen: newest events deleted leave no
    # gap in the chain, but the index knows they existed.
    for hex_id, head in view.indexed_heads(only).items():
        w = walker(hex_id)
        if w.broken is None and w.version < head:
            w.fail(w.version + 1, f"versions {w.version + 1}..{head} were stored and are gone")
    for hex_id, w in list(walkers.items()):
        if w.broken is None and w.attachments:
            try:
                check_attachments(core, w)
            except ContextNotFoundError:
                if only is not None:
                    raise
                del walkers[hex_id]  # erased since its events were read
    return walkers, events
