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
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, TypeVar, cast
from uuid import UUID

from ctxstore.adapters.storage.audit_index import AuditFilter
from ctxstore.adapters.storage.search_index import (
    After,
    Found,
    Read,
    SearchFilter,
    SearchIndex,
    SearchRow,
)
from ctxstore.adapters.store import audit, sweeping
from ctxstore.adapters.store.core import StoreCore
from ctxstore.domain.context import Context
from ctxstore.domain.errors import (
    ContextNotFoundError,
    InvalidOperationError,
    StoreUnavailableError,
)
from ctxstore.domain.limits import check_int, check_text
from ctxstore.domain.search.query import Query, parse_query
from ctxstore.domain.search.snippet import snippet
from ctxstore.domain.search.text import digest, searchable_text
from ctxstore.projections.audit import to_micros
from ctxstore.projections.search import SearchHit, SearchPage

PAGE = 1000  # audit rows read per step of a catch-up
ATTEMPTS = 5  # reads of a context that changed under each (a bound, another catch-up)
T = TypeVar("T")
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
    newest = index.newest_event()
    pending = index.pending()
    if newest >= 0 and newest == index.seen_newest and not pending:
        return index.position()  # nothing stored since the last catch-up
    reached = audit.catch_up(core)
    position = index.position()
    if (pending or position < reached) and audit.read_only(core):
        raise audit.behind(core, "search")
    for hex_id in pending:  # bounded histories: indexed anew from what they kept
        index_context(core, UUID(hex_id))
    view = core.storage.audit_index
    while position < reached:
        page = view.query(AuditFilter(), position, PAGE)
        if not page:
            break
        for cid in dict.fromkeys(row.context_id for row, _ in page):
            index_context(core, cid)
        position = page[-1][0].position
        index.advance(position)
    index.seen_newest = newest
    return position


def index_context(core: StoreCore, cid: UUID) -> None:
    """Bring one context's rows up to its newest version, and which are visible: read
    again when the context changed under the read (a history bound removed events read,
    another catch-up stored first)."""
    if not indexed(core):
        return
    for _ in range(ATTEMPTS):
        if _index_once(core, cid):
            return
    raise StoreUnavailableError(
        f"the search index could not be brought up to date for context {cid}: it changed "
        f"under each of {ATTEMPTS} reads (retry)"
    )


def _index_once(core: StoreCore, cid: UUID) -> bool:
    """One read of the context's new events and one store of their rows; whether stored."""
    index = index_of(core)
    hex_id = cid.hex
    head = index.head(hex_id)
    try:
        version = _read(core, cid, lambda ctx: ctx.version)
    except ContextNotFoundError:
        index.forget(hex_id)
        return True
    if head >= version:
        return True
    events = list(cast(Iterable[Context.Event], core.storage.events.get(cid, gt=head, lte=version)))
    touched: set[str] | None = set()  # the messages whose visibility may have changed
    expected, gap = head + 1, False
    for event in events:
        gap = gap or event.originator_version != expected  # history removed below (a bound)
        expected = event.originator_version + 1
        touched = _touched(event, touched)
    whole = touched is None or gap or head == 0  # every message's visibility

    def rows_and_visible(ctx: Context) -> tuple[list[SearchRow], dict[str, str]]:
        # (under the context's lock: what it shows now, read once)
        shown = set(ctx.order)
        meta = (hex_id, ctx.tenant, ctx.name)
        rows = [r for e in events for m in _written(e, shown, ctx.stored_message)
                for r in _row(*meta, m, e.originator_version, to_micros(e.timestamp))]  # fmt: skip
        if gap:  # the checkpoint's messages, as of the context's version
            at = to_micros(ctx.modified_on)
            rows += [r for i in ctx.order for r in _row(*meta, ctx.stored_message(i), version, at)]
        ids = ctx.order if whole else [i for i in (touched or ()) if i in shown]
        return rows, {i: digest(searchable_text(ctx.stored_message(i))) for i in ids}

    try:
        rows, visible = _read(core, cid, rows_and_visible)
    except ContextNotFoundError:
        index.forget(hex_id)
        return True
    read = Read(since=head, events=len(events))
    return index.store(hex_id, rows, visible, version, only=None if whole else touched, read=read)


def _read(core: StoreCore, cid: UUID, read: Callable[[Context], T]) -> T:
    held = core.cache.held(cid)
    with held.lock:
        return read(core.fresh(cid, held))


def _touched(event: Any, touched: set[str] | None) -> set[str] | None:
    """The messages an event may have shown or hidden (None: any of them)."""
    if touched is None:
        return None
    if isinstance(event, Context.MessagesInserted):
        return touched | {str(m["id"]) for m in event.messages}
    if isinstance(event, Context.MessagesDeleted):
        return touched | set(event.ids)
    if isinstance(event, Context.MessagesCompressed):
        return touched | set(event.ids) | {str(event.summary["id"])}
    if isinstance(
        event, Context.MessageReplaced | Context.MessageFinished | Context.MessageAbandoned
    ):
        return touched | {event.id}
    if isinstance(event, Context.MessageBegun):
        return touched | {str(event.message["id"])}
    if isinstance(event, Context.ContextCreated | Context.BatchStarted | Context.UsageRecorded):
        return touched
    return None  # a rollback, an expansion, a fork: whatever it shows again


def indexed(core: StoreCore) -> bool:
    """Whether this store's contexts are indexed (encrypted ones only when asked)."""
    cfg = core.settings.search
    return cfg.enabled and (core.storage.keys is None or cfg.index_encrypted)


def _written(
    event: Any, shown: set[str], stored: Callable[[str], dict[str, Any]]
) -> list[dict[str, Any]]:
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
        return [stored(event.id)] if event.id in shown else []
    return []


def _row(
    hex_id: str, tenant: str | None, name: str | None, message: dict[str, Any], version: int,
    at: int,
) -> list[SearchRow]:  # fmt: skip
    text = searchable_text(message)
    if not text.strip():
        return []
    return [SearchRow(
        context_hex=hex_id, message_id=str(message.get("id", "")), version=version,
        role=str(message.get("role", "")), at=at, tenant=tenant, text=text, digest=digest(text),
        name=name,
    )]  # fmt: skip


def reindex(core: StoreCore) -> int:
    """Rebuild the index from the events; the rows it holds afterwards."""
    index = index_of(core)
    index.reset()
    index.seen_newest = None
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
                hits.append(_hit(f, asked))
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


def _alive(core: StoreCore, found: list[Found]) -> set[str]:
    """The contexts of these hits still served: an erased context's rows went with its
    events; an expired one is never served, swept or not."""
    seen = {f.row.context_hex: f.row.tenant for f in found}
    if not core.retention.active():
        return set(seen)
    listed = [_Listed(UUID(h), tenant) for h, tenant in seen.items()]
    return {s.context_id.hex for s in sweeping.unexpired(core, listed)}


class _Listed:
    """A context as `sweeping.unexpired` judges it."""

    def __init__(self, context_id: UUID, tenant: str | None) -> None:
        self.context_id, self.tenant = context_id, tenant


def _hit(f: Found, asked: Query) -> SearchHit:
    r = f.row
    return SearchHit(
        context_id=UUID(r.context_hex), context_name=r.name, message_id=r.message_id,
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
