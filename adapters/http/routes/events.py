"""The live tail as Server-Sent Events: a context's new events (`id:` its version), or a
tenant's across its contexts (`id:` the audit position), resumable with Last-Event-ID."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import StreamingResponse

from ctxstore.adapters.http.deps import API, Owned, Requester
from ctxstore.adapters.http.tail import TailHub, event_stream
from ctxstore.adapters.store.shards.store import ShardedStore
from ctxstore.projections.history import event_type_filter

router = APIRouter(prefix=API, tags=["live tail"])
SSE: dict[int | str, dict[str, Any]] = {200: {"content": {"text/event-stream": {}},
             "description": "`id:` the version (or position), `event:` its type, `data:` the "
             "event as JSON (TailEvent; audit entries for a tenant's stream)"}}  # fmt: skip
LastEventId = Annotated[
    str | None,
    Header(alias="Last-Event-ID", description="resume after this event (its SSE id)"),
]


def _hub(request: Request) -> TailHub:
    hub: TailHub = request.app.state.tail
    return hub


@router.get("/contexts/{context_id}/events", response_class=StreamingResponse, responses=SSE)
async def context_events(
    ctx: Owned, request: Request, last_event_id: LastEventId = None,
    after: Annotated[int | None, Query(ge=0, le=2**62, description="start after this version; "
                                       "default: the head (only new events)")] = None,
) -> StreamingResponse:  # fmt: skip
    """Every new event of the context as it is written (the deltas of a streaming reply
    included): Server-Sent Events, `id:` the version. Reconnect with Last-Event-ID to
    resume exactly after the last event seen."""
    hub = _hub(request)
    cid = await hub.checked(ctx)
    start = hub.resume_point(last_event_id, after)
    assert not isinstance(start, str)  # a context's tail resumes after a version
    return event_stream(hub, hub.context_events(ctx.store, ctx.pool, cid, start))


@router.get("/events", response_class=StreamingResponse, responses=SSE)
async def tenant_events(
    ctx: Requester, request: Request, last_event_id: LastEventId = None,
    after: Annotated[int | None, Query(ge=0, le=2**62, description="start after this audit "
                                       "position; default: now")] = None,
    types: Annotated[list[str] | None, Query(description="only these event types")] = None,
    actor: Annotated[str | None, Query(max_length=200)] = None,
) -> StreamingResponse:  # fmt: skip
    """Every new event of the caller's contexts (filtered by type and actor) as audit
    entries: Server-Sent Events, `id:` the audit position."""
    hub = _hub(request)
    start = hub.resume_point(last_event_id, after, merged=isinstance(ctx.store, ShardedStore))
    event_type_filter(types)  # refused now (422), not once the stream has started
    return event_stream(
        hub, hub.tenant_events(ctx.store, ctx.pool, ctx.who.tenant, start, types, actor)
    )
