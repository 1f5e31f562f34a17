"""Search across contexts: the index brought up to date, then queried.

The index (adapters/storage/search_index.py) is a projection kept off the callers' commits:
a search first catches it up — the contexts the audit index saw change since the position
the search index reached, each from the version it holds to its newest — so a search sees
every write that returned before it began. The service also catches it up in the
background, as it does the audit index. A context expired by a retention policy is never
found, swept or not; one encrypted with a key of its own is indexed only when the operator
asked for it (CTXSTORE_SEARCH__INDEX_ENCRYPTED).
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, cast
from uuid import UUID

from ctxstore.adapters.storage.audit_index import AuditFilter
from ctxstore.adapters.storage.search_index import (
    After,
    Found,
    SearchFilter,
    SearchIndex,
    SearchRow,
)
from ctxstore.adapters.store import audit, sweeping
from ctxstore.adapters.store.core import StoreCore
from ctxstore.domain.context import Context
from ctxstore.domain.errors import ContextNotFoundError, InvalidOperationError
from ctxstore.domain.limits import check_int, check_text
from ctxstore.domain.search.query import Query, parse_query
from ctxstore.domain.search.snippet import snippet
from ctxstore.domain.search.text import digest, searchable_text
from ctxstore.projections.audit import to_micros
from ctxstore.projections.search import SearchHit, SearchPage

PAGE = 1000  # audit rows read per step of a catch-up
MAX_LIMIT = 100  # hits a page may ask for
OFF = "search is turned off on this store (CTXSTORE_SEARCH__ENABLED=false)"


def index_of(core: StoreCore) -> SearchIndex:
    found = core.storage.search_index
    if found is None:
        raise InvalidOperationError(OFF)
    return found


def catch_up(core: StoreCore) -> int:
    """Index every context changed since the position reached; the position reached."""
    index = index_of(core)
    reached = audit.catch_up(core)
    for hex_id in index.pending():  # bounded histories: indexed anew from what they kept
        index_context(core, UUID(hex_id))
    position = index.position()
    view = core.storage.audit_index
    while position < reached:
        page = view.query(AuditFilter(), position, PAGE)
        if not page:
            break
        for cid in dict.fromkeys(row.context_id for row, _ in page):
            index_context(core, cid)
        position = page[-1][0].position
        index.advance(position)
    return position


def index_context(core: StoreCore, cid: UUID) -> None:
    """Bring one context's rows up to its newest version, and which are visible."""
    index = index_of(core)
    hex_id = cid.hex
    if not indexed(core):
        return
    try:
        held = core.cache.held(cid)
        with held.lock:
            ctx = core.fresh(cid, held)
            shown = [ctx.stored_message(i) for i in ctx.order]
            version = ctx.version
            tenant = ctx.tenant
    except ContextNotFoundError:
        index.forget(hex_id)
        return
    head = index.head(hex_id)
    if head >= version:
        return
    current = {str(m["id"]): m for m in shown}
    rows: list[SearchRow] = []
    expected, gap = head + 1, False
    for event in cast(Iterable[Context.Event], core.storage.events.get(cid, gt=head, lte=version)):
        gap = gap or event.originator_version != expected
        expected = event.originator_version + 1
        at = to_micros(event.timestamp)
        for message in _written(event, current):
            rows += _row(hex_id, message, event.originator_version, at, tenant)
    if gap:
        # History removed below what the index holds (a retention bound): the visible
        # messages kept in the checkpoint are indexed as of the context's version.
        at = to_micros(ctx.modified_on)
        for m in shown:
            rows += _row(hex_id, m, version, at, tenant)
    visible = {str(m["id"]): digest(searchable_text(m)) for m in shown}
    index.store(hex_id, rows, visible, version)


def indexed(core: StoreCore) -> bool:
    """Whether this store's contexts are indexed (encrypted ones only when asked)."""
    cfg = core.settings.search
    return cfg.enabled and (core.storage.keys is None or cfg.index_encrypted)


def _written(event: Any, current: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages whose text an event wrote (a streamed reply's: as it now stands)."""
    if isinstance(event, Context.MessagesInserted):
        return list(event.messages)
    if isinstance(event, Context.MessageReplaced):
        return [{**event.message, "id": event.id}]
    if isinstance(event, Context.MessagesCompressed):
        return [event.summary]
    if isinstance(event, Context.ContextForked):
        return [e["message"] for e in event.entries]
    if isinstance(event, Context.MessageFinished | Context.MessageAbandoned):
        found = current.get(event.id)
        return [found] if found is not None else []
    return []


def _row(
    hex_id: str, message: dict[str, Any], version: int, at: int, tenant: str | None
) -> list[SearchRow]:
    text = searchable_text(message)
    if not text.strip():
        return []
    return [SearchRow(
        context_hex=hex_id, message_id=str(message.get("id", "")), version=version,
        role=str(message.get("role", "")), at=at, tenant=tenant, text=text, digest=digest(text),
    )]  # fmt: skip


def reindex(core: StoreCore) -> int:
    """Rebuild the index from the events; the rows it holds afterwards."""
    index = index_of(core)
    index.reset()
    catch_up(core)
    return index.count()


# ---- the query -------------------------------------------------------------------------


def search(
    core: StoreCore, query: str, *, tenant: str | None = None,
    context_ids: Sequence[UUID | str] | None = None, roles: Sequence[str] | None = None,
    since: datetime | None = None, until: datetime | None = None, include_hidden: bool = False,
    limit: int = 20, cursor: str | None = None,
) -> SearchPage:  # fmt: skip
    """One page of the messages matching `query`, best first (see ContextOperations.search)."""
    asked = parse_query(query)
    where = _where(tenant, context_ids, roles, since, until, include_hidden)
    limit = check_int(limit, "limit", low=1, high=MAX_LIMIT)
    fingerprint = _fingerprint(asked, where)
    after = _after(cursor, fingerprint)
    index = index_of(core)
    catch_up(core)
    hits: list[SearchHit] = []
    last = after
    while True:
        wanted = limit - len(hits) + 1  # one more than fits: whether a next page exists
        found = index.query(asked, where, last, wanted)
        alive = _alive(core, found)
        for f in found:
            if len(hits) == limit:
                assert last is not None
                return SearchPage(hits=hits, cursor=_cursor(last, fingerprint))
            last = After(f.score, f.key)
            if f.row.context_hex in alive:
                hits.append(_hit(f, asked, alive[f.row.context_hex]))
        if len(found) < wanted:
            return SearchPage(hits=hits, cursor=None)


def _where(
    tenant: str | None, context_ids: Sequence[UUID | str] | None, roles: Sequence[str] | None,
    since: datetime | None, until: datetime | None, include_hidden: bool,
) -> SearchFilter:  # fmt: skip
    hexes = None
    if context_ids is not None:
        if isinstance(context_ids, str | UUID):
            context_ids = [context_ids]
        hexes = [StoreCore.id(c).hex for c in context_ids]
    if roles is not None:
        if isinstance(roles, str):
            roles = [roles]
        roles = [check_text(r, "role", 40, optional=False) for r in roles]
    if not isinstance(include_hidden, bool):
        raise InvalidOperationError(
            f"include_hidden must be true or false, got {include_hidden!r:.40}"
        )
    return SearchFilter(
        tenant=tenant, context_hexes=hexes, roles=roles, since=audit.time_bound(since, "since"),
        until=audit.time_bound(until, "until"), include_hidden=include_hidden,
    )  # fmt: skip


def _alive(core: StoreCore, found: list[Found]) -> dict[str, str | None]:
    """The contexts of these hits still served (not erased, not expired), with names."""
    named: dict[str, tuple[UUID, str | None, str | None]] = {}
    for f in found:
        hex_id = f.row.context_hex
        if hex_id in named:
            continue
        cid = UUID(hex_id)
        try:
            held = core.cache.held(cid)
            with held.lock:
                ctx = core.fresh(cid, held)
                named[hex_id] = (cid, ctx.name, ctx.tenant)
        except ContextNotFoundError:
            continue  # erased since it was indexed
    listed = [_Listed(cid, tenant) for cid, _, tenant in named.values()]
    served = {s.context_id.hex for s in sweeping.unexpired(core, listed)}
    return {h: named[h][1] for h in named if h in served}


class _Listed:
    """A context as `sweeping.unexpired` judges it."""

    def __init__(self, context_id: UUID, tenant: str | None) -> None:
        self.context_id, self.tenant = context_id, tenant


def _hit(f: Found, asked: Query, name: str | None) -> SearchHit:
    r = f.row
    return SearchHit(
        context_id=UUID(r.context_hex), context_name=name, message_id=r.message_id,
        role=r.role, snippet=snippet(r.text, asked.shown), score=f.score,
        at=datetime.fromtimestamp(r.at / 1e6).astimezone(), visible=f.visible,
        version=r.version,
    )  # fmt: skip


def _fingerprint(asked: Query, where: SearchFilter) -> str:
    said = json.dumps([asked.groups, repr(where)], ensure_ascii=False)
    return hashlib.blake2b(said.encode(), digest_size=6).hexdigest()


def _cursor(last: After, fingerprint: str) -> str:
    said = json.dumps({"s": last.score, "k": last.key, "f": fingerprint})
    return base64.urlsafe_b64encode(said.encode()).decode().rstrip("=")


def _after(cursor: str | None, fingerprint: str) -> After | None:
    if cursor is None:
        return None
    try:
        said = json.loads(base64.urlsafe_b64decode(str(cursor) + "=" * (-len(str(cursor)) % 4)))
        after = After(float(said["s"]), int(said["k"]))
        same = said["f"] == fingerprint
    except (ValueError, KeyError, TypeError) as exc:
        raise InvalidOperationError(f"not a search cursor: {cursor!r:.60}") from exc
    if not same:
        raise InvalidOperationError("the cursor belongs to another search (its query or filters)")
    return after


__all__ = ["catch_up", "index_context", "reindex", "search"]
