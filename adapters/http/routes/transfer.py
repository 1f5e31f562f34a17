"""Export and import: a context's events as JSON lines, and transcripts."""

from __future__ import annotations

from fastapi import APIRouter, Response

from ctxstore.adapters.http.deps import API, Owned, Requester, pooled
from ctxstore.adapters.http.schemas import Created, ImportBody, TranscriptBody

router = APIRouter(prefix=f"{API}/contexts", tags=["transfer"])
NDJSON = "application/x-ndjson"


@router.get("/{context_id}/export", response_class=Response)
@pooled
def export_events(ctx: Owned) -> Response:
    """The context's events as JSON lines (ids, versions, timestamps and chains kept)."""
    lines = list(ctx.store.export_events(ctx.cid))
    return Response("".join(line + "\n" for line in lines), media_type=NDJSON)


@router.post("/import", status_code=201, response_model=Created)
@pooled
def import_events(ctx: Requester, body: ImportBody) -> Created:
    """Store an exported context (its JSON lines); all or nothing. A caller with a tenant
    imports only its own tenant's contexts."""
    cid = ctx.store.import_events(
        body.lines, new_id=body.new_id, without_trailer=body.without_trailer,
        tenant=ctx.who.tenant,
    )  # fmt: skip
    return Created(context_id=cid, version=ctx.store.visible(cid).version)


@router.post("/import-transcript", status_code=201, response_model=Created)
@pooled
def import_transcript(ctx: Requester, body: TranscriptBody) -> Created:
    """A new context from an OpenAI-format transcript; all messages or nothing."""
    cid = ctx.store.import_transcript(
        body.messages, name=body.name, actor=ctx.who.actor, tenant=ctx.who.tenant
    )
    return Created(context_id=cid, version=ctx.store.visible(cid).version)
