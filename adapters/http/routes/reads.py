"""Reads of one context: history, batches, diff, token series, prompts, calls, replay,
and the check of its hash chain."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from ctxstore.adapters.http.deps import API, Owned, pooled
from ctxstore.adapters.http.schemas import PromptBody, Shaped, ShapedAs, Step
from ctxstore.adapters.store.results import (
    BatchFrame,
    Diff,
    HistoryEntry,
    ModelCall,
    Prompt,
    PromptDiff,
    TailEvent,
    TokenSeries,
    Verification,
)
from ctxstore.domain.conversions import convert
from ctxstore.domain.errors import InvalidOperationError
from ctxstore.projections.tokens import MAX_POINTS

router = APIRouter(prefix=f"{API}/contexts/{{context_id}}", tags=["reads"])
Version = Annotated[int, Query(ge=1, le=2**62)]
MAX_STEPS = 1000  # replay steps one request returns; page with from_version
MAX_PICKED = 200  # versions one stored-events request may name


@router.get("/history", response_model=list[HistoryEntry])
@pooled
def history(
    ctx: Owned,
    types: Annotated[list[str] | None, Query()] = None,
    actor: str | None = None,
    from_version: Annotated[int | None, Query(ge=1, le=2**62)] = None,
    to_version: Annotated[int | None, Query(ge=1, le=2**62)] = None,
    changes: bool = False,
) -> list[HistoryEntry]:
    """Every event of the context, with what rollbacks reverted (and what each changed)."""
    return ctx.store.history(
        ctx.cid, types=types, actor=actor, from_version=from_version, to_version=to_version,
        changes=changes,
    )  # fmt: skip


@router.get("/batches", response_model=list[BatchFrame])
@pooled
def batches(ctx: Owned) -> list[BatchFrame]:
    """The open batches, lowest first."""
    return ctx.store.batches(ctx.cid)


@router.get("/diff", response_model=Diff)
@pooled
def diff(ctx: Owned, from_version: Version, to_version: Version) -> Diff:
    """Messages added, removed and changed between two versions."""
    return ctx.store.diff(ctx.cid, from_version, to_version)


@router.get("/tokens", response_model=TokenSeries)
@pooled
def token_series(
    ctx: Owned, points: Annotated[int, Query(ge=2, le=MAX_POINTS)] = 500
) -> TokenSeries:
    """Visible tokens over the versions (thinned), compactions and rollbacks marked."""
    return ctx.store.token_series(ctx.cid, points=points)


@router.post("/prompt", response_model=Prompt)
@pooled
def build_prompt(ctx: Owned, body: PromptBody) -> Prompt:
    """What to send under a token budget, and what was left out and why."""
    return ctx.store.build_prompt(
        ctx.cid, body.budget, body.strategy, query=body.query, resources=body.resources,
        safety=body.safety, at_version=body.at_version,
    )  # fmt: skip


@router.get("/calls", response_model=list[ModelCall])
@pooled
def calls(ctx: Owned) -> list[ModelCall]:
    """Recorded model calls, in order (numbered from 1)."""
    return ctx.store.calls(ctx.cid)


@router.get("/calls/{number}", response_model=ModelCall)
@pooled
def call(
    ctx: Owned, number: Annotated[int, Path(ge=-(2**62), le=2**62, description="1: the first")]
) -> ModelCall:
    """One recorded call (-1 the last) with exactly the messages sent and its response."""
    return ctx.store.call(ctx.cid, number)


@router.get("/calls/{number}/diff", response_model=PromptDiff)
@pooled
def call_diff(
    ctx: Owned, number: Annotated[int, Path(ge=-(2**62), le=2**62, description="1: the first")]
) -> PromptDiff:
    """What call `number` (-1 the last) sent against what the call before it sent."""
    return ctx.store.call_diff(ctx.cid, number)


@router.get("/shaped", response_model=Shaped)
@pooled
def shaped(
    ctx: Owned,
    shape: Annotated[
        ShapedAs,
        Query(description="stored: each message as it came; else a provider's request shape"),
    ] = "stored",
    at_version: Version | None = None,
    ids: Annotated[list[str] | None, Query(max_length=1000, description="only these")] = None,
    call: Annotated[
        int | None, Query(ge=-(2**62), le=2**62, description="what recorded call N sent")
    ] = None,
) -> Shaped:
    """Messages to copy out, in a shape: the visible context (at a version), some of its
    messages, or exactly what a recorded call sent."""
    if call is not None:
        messages = ctx.store.call(ctx.cid, call).messages or []
    else:
        messages = ctx.store.visible(ctx.cid, at_version=at_version).messages
    if ids is not None:
        wanted = set(ids)
        messages = [m for m in messages if m.id in wanted]
    if shape == "stored":
        return Shaped(shape=shape, payload=[m.as_given() for m in messages])
    done = convert(messages, shape)
    return Shaped(shape=shape, payload=done.payload, omitted=done.omitted)


@router.get("/stored-events", response_model=list[TailEvent])
@pooled
def stored_events(
    ctx: Owned,
    after: Annotated[int, Query(ge=0, le=2**62, description="the events after this version")] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    payload: Annotated[
        bool, Query(description="false: without what each recorded (its line `what` only)")
    ] = True,
    versions: Annotated[
        list[int] | None,
        Query(max_length=MAX_PICKED, description="these versions only (instead of after)"),
    ] = None,
) -> list[TailEvent]:
    """A page of the context's stored events after a version, each with what it recorded
    (the messages inserted, the deltas appended, ...) and a line saying what it did, as the
    live tail delivers them; with `versions`, those events (a filtered list's)."""
    if versions is None:
        found = ctx.store.hooks.events_after(ctx.cid, after, limit)
    else:
        if any(not 1 <= v <= 2**62 for v in versions):
            raise InvalidOperationError("versions are 1 .. 2**62")
        picked = sorted(set(versions))
        found = [
            e
            for v in picked
            for e in ctx.store.hooks.events_after(ctx.cid, v - 1, 1)
            if e.version == v
        ]
    if not payload:
        return [e.model_copy(update={"payload": {}}) for e in found]
    return found


@router.get("/replay", response_model=list[Step])
@pooled
def replay(ctx: Owned, from_version: Version = 1, to_version: Version | None = None) -> list[Step]:
    """Each event in the range with the visible context after it, at most 1000 a request."""
    last = to_version if to_version is not None else from_version + MAX_STEPS - 1
    if last - from_version + 1 > MAX_STEPS:
        raise InvalidOperationError(f"a replay request covers at most {MAX_STEPS} versions")
    if to_version is None:  # up to the head, or the page's end
        last = min(last, ctx.store.visible(ctx.cid).version)
    steps = ctx.store.replay(ctx.cid, from_version=from_version, to_version=last)
    return [Step(event=e, visible=v, calls=c) for e, v, c in steps]


@router.get("/verify", response_model=Verification)
@pooled
def verify(ctx: Owned) -> Verification:
    """Check the context's hash chain."""
    return ctx.store.verify(ctx.cid)
