"""The operations on a context, and usage and compaction: each answers `Written` (or the
compaction) with the context's new version as ETag; If-Match makes a write conditional."""

from __future__ import annotations

from fastapi import APIRouter, Response

from ctxstore.adapters.http.deps import API, Owned, expected, pooled, written
from ctxstore.adapters.http.schemas import (
    BatchEndBody,
    Command,
    CompactBody,
    CompressBody,
    DeleteBody,
    ExpandBody,
    InsertBody,
    RecoverBody,
    ReplaceBody,
    ResponseBody,
    UsageBody,
)
from ctxstore.adapters.store.results import Compaction, Prompt, Written
from ctxstore.domain.captured import CapturedCall

router = APIRouter(prefix=f"{API}/contexts/{{context_id}}", tags=["commands"])


@router.post("/insert", response_model=Written)
@pooled
def insert(ctx: Owned, body: InsertBody) -> Response:
    """Append messages, or place them after a visible message."""
    return written(ctx.store.insert(
        ctx.cid, body.messages, after=body.after, actor=ctx.who.actor,
        expected_version=expected(body, ctx.who.if_match), format=body.format,
        calls=body.calls,
    ))  # fmt: skip


@router.post("/delete", response_model=Written)
@pooled
def delete(ctx: Owned, body: DeleteBody) -> Response:
    """Hide visible messages (a tool call goes with its results)."""
    return written(ctx.store.delete(
        ctx.cid, body.ids, actor=ctx.who.actor, expected_version=expected(body, ctx.who.if_match)
    ))  # fmt: skip


@router.post("/replace", response_model=Written)
@pooled
def replace(ctx: Owned, body: ReplaceBody) -> Response:
    """Give a visible message new content under the same id."""
    return written(ctx.store.replace(
        ctx.cid, body.id, body.message, actor=ctx.who.actor,
        expected_version=expected(body, ctx.who.if_match),
    ))  # fmt: skip


@router.post("/compress", response_model=Written)
@pooled
def compress(ctx: Owned, body: CompressBody) -> Response:
    """Put one summary in place of a contiguous run of visible messages."""
    return written(ctx.store.compress(
        ctx.cid, body.ids, body.summary, stats=body.stats, actor=ctx.who.actor,
        expected_version=expected(body, ctx.who.if_match),
    ))  # fmt: skip


@router.post("/expand", response_model=Written)
@pooled
def expand(ctx: Owned, body: ExpandBody) -> Response:
    """Put the messages a summary covers back in its place, keeping later messages."""
    return written(ctx.store.expand(
        ctx.cid, body.summary_id, actor=ctx.who.actor,
        expected_version=expected(body, ctx.who.if_match),
    ))  # fmt: skip


@router.post("/batch-start", response_model=Written)
@pooled
def batch_start(ctx: Owned, body: Command | None = None) -> Response:
    """Open a batch: a point to roll back to."""
    return written(ctx.store.batch_start(
        ctx.cid, actor=ctx.who.actor, expected_version=expected(body, ctx.who.if_match)
    ))  # fmt: skip


@router.post("/batch-end", response_model=Written)
@pooled
def batch_end(ctx: Owned, body: BatchEndBody | None = None) -> Response:
    """Close batches: roll back to where the batch opened, unless keep."""
    body = body or BatchEndBody()
    return written(ctx.store.batch_end(
        ctx.cid, body.to, keep=body.keep, actor=ctx.who.actor,
        expected_version=expected(body, ctx.who.if_match),
    ))  # fmt: skip


@router.post("/usage", response_model=Written)
@pooled
def record_usage(ctx: Owned, body: UsageBody) -> Response:
    """Record what a provider billed for a call, and what was sent."""
    return written(ctx.store.record_usage(
        ctx.cid, model=body.model, prompt_tokens=body.prompt_tokens,
        completion_tokens=body.completion_tokens, version=body.version,
        counted_tokens=body.counted_tokens, sent=body.sent, actor=ctx.who.actor,
        latency=body.latency,
    ))  # fmt: skip


@router.post("/responses", response_model=Written)
@pooled
def record_response(ctx: Owned, body: ResponseBody) -> Response:
    """Record a model call as the SDK returned it: its output inserted, its usage recorded."""
    return written(ctx.store.record_response(
        ctx.cid, body.response, request=body.request, actor=ctx.who.actor,
        latency=body.latency,
    ))  # fmt: skip


@router.post("/calls", response_model=Written)
@pooled
def record_call(ctx: Owned, body: CapturedCall) -> Response:
    """Record a model call as its provider received it: the request body as sent, the reply
    or the error, usage and timing. Nothing is inserted; the same `call_id` again is a
    no-op."""
    return written(ctx.store.record_call(ctx.cid, body, actor=ctx.who.actor))


@router.post("/recover", response_model=Prompt)
@pooled
def recover_from_overflow(ctx: Owned, body: RecoverBody) -> Prompt:
    """After a provider refused an overflowing prompt: compact as needed, then the prompt to
    retry with, which fits."""
    return ctx.store.recover_from_overflow(
        ctx.cid, body.budget, body.strategy, query=body.query, resources=body.resources,
        safety=body.safety, actor=ctx.who.actor,
    )  # fmt: skip


@router.post("/compact", response_model=Compaction)
@pooled
def compact(ctx: Owned, body: CompactBody | None = None) -> Compaction:
    """Summarize the older half of the rounds since the latest summary."""
    body = body or CompactBody()
    return ctx.store.compact(
        ctx.cid, trigger=body.trigger, dry_run=body.dry_run, actor=ctx.who.actor
    )
