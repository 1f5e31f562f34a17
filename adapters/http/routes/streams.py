"""A reply stored while it streams: begin, append deltas, finish or abandon. Each answers
`Written` with the context's new version as ETag; If-Match makes a write conditional."""

from __future__ import annotations

from fastapi import APIRouter, Response

from ctxstore.adapters.http.deps import API, Owned, expected, pooled, written
from ctxstore.adapters.http.schemas import AbandonBody, AppendBody, BeginBody, FinishBody
from ctxstore.adapters.store.results import Written

router = APIRouter(prefix=f"{API}/contexts/{{context_id}}", tags=["streams"])


@router.post("/begin", response_model=Written)
@pooled
def begin(ctx: Owned, body: BeginBody | None = None) -> Response:
    """Start an assistant reply that streams in; visible at once, marked incomplete."""
    body = body or BeginBody()
    return written(ctx.store.begin(
        ctx.cid, body.message, after=body.after, format=body.format, actor=ctx.who.actor,
        expected_version=expected(body, ctx.who.if_match),
    ))  # fmt: skip


@router.post("/append", response_model=Written)
@pooled
def append(ctx: Owned, body: AppendBody) -> Response:
    """Add deltas to a streaming reply (one event)."""
    return written(ctx.store.append(
        ctx.cid, body.id, body.deltas, actor=ctx.who.actor,
        expected_version=expected(body, ctx.who.if_match),
    ))  # fmt: skip


@router.post("/finish", response_model=Written)
@pooled
def finish(ctx: Owned, body: FinishBody) -> Response:
    """Complete a streaming reply, after its last deltas, or as the message given."""
    return written(ctx.store.finish(
        ctx.cid, body.id, body.message, deltas=body.deltas, actor=ctx.who.actor,
        expected_version=expected(body, ctx.who.if_match),
    ))  # fmt: skip


@router.post("/abandon", response_model=Written)
@pooled
def abandon(ctx: Owned, body: AbandonBody) -> Response:
    """Stop a streaming reply for good: kept as it stands (marked), or hidden."""
    return written(ctx.store.abandon(
        ctx.cid, body.id, reason=body.reason, keep=body.keep, deltas=body.deltas,
        actor=ctx.who.actor, expected_version=expected(body, ctx.who.if_match),
    ))  # fmt: skip
