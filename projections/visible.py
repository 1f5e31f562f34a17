"""The visible context: the exact message list to send to a model, at a version."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from uuid import UUID

from pydantic import BaseModel, ConfigDict

from ctxstore.domain.context import Context
from ctxstore.domain.conversions import ShapedMessages
from ctxstore.domain.messages import Message
from ctxstore.domain.tokens import REPLY_PRIMING


class BatchFrame(BaseModel):
    """One open batch: its number, the version of its BatchStarted event, its base size."""

    model_config = ConfigDict(frozen=True)

    batch: int
    opened_at_version: int
    visible_at_open: int


class VisibleContext(ShapedMessages, BaseModel):
    """A context's visible messages at one version, with the batch stack of that moment."""

    model_config = ConfigDict(frozen=True)

    context_id: UUID
    version: int
    modified_at: datetime
    batch: int
    batches: list[BatchFrame]
    messages: list[Message]
    summaries: dict[str, list[str]]  # summary message id -> ids it covers
    encoding: str
    token_counts: dict[str, int]  # message id -> tokens it costs in a prompt
    tokens: int  # what sending these messages costs: their sum plus the reply priming
    estimated: bool  # some counts are estimates (the encoding's file was not available)

    @property
    def ids(self) -> list[str]:
        """The visible messages' ids, in order."""
        return [m.id for m in self.messages if m.id is not None]  # every visible one has one


def batch_stack(ctx: Context) -> list[BatchFrame]:
    """The open batches above batch 0, lowest first."""
    return [
        BatchFrame(
            batch=s["batch"], opened_at_version=s["version"], visible_at_open=len(s["order"])
        )
        for s in ctx.savepoints
    ]


def visible_of(ctx: Context, messages: list[Message] | None = None) -> VisibleContext:
    """The visible context held by an aggregate (loaded from a snapshot or replayed).

    `messages` are its entries already validated (a store remembers them); else validated here.
    """
    return VisibleContext(
        context_id=ctx.id,
        version=ctx.version,
        modified_at=ctx.modified_on,
        batch=ctx.batch,
        batches=batch_stack(ctx),
        messages=ctx.visible_messages() if messages is None else messages,
        summaries={
            i: list(ctx.entries[i]["summary_of"]) for i in ctx.order if ctx.entries[i]["summary_of"]
        },
        encoding=ctx.encoding,
        token_counts={i: int(ctx.entries[i]["tokens"]) for i in ctx.order},
        tokens=ctx.tokens + REPLY_PRIMING,
        estimated=ctx.estimated > 0,
    )


def replay(events: Iterable[Context.Event]) -> Context:
    """Fold a context's events from the first, without snapshots (the reference replay)."""
    ctx: Context | None = None
    for e in events:
        ctx = e.mutate(ctx)
    if ctx is None:
        raise ValueError("no events to replay")
    return ctx
