"""Model calls as the store records them: what a provider billed and what was sent."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from uuid import UUID

from ctxstore.adapters.store.core import StoreCore
from ctxstore.adapters.store.debug import sent_items
from ctxstore.adapters.store.results import ModelUsage, Prompt, Written
from ctxstore.adapters.store.writer import Writer
from ctxstore.domain.context import JSON, Context
from ctxstore.domain.messages import Message
from ctxstore.domain.prompt import sent_with
from ctxstore.domain.tokens import REPLY_PRIMING
from ctxstore.projections.usage import usage_by_model


def record(
    writer: Writer,
    cid: UUID,
    *,
    model: str,
    prompt_tokens: int,
    completion_tokens: int,
    version: int | None,
    counted_tokens: int | None,
    prompt: Prompt | None,
    sent: Sequence[str | Message | JSON] | None,
    actor: str,
    latency: float | None = None,
) -> Written:
    """Record one call's usage (see ContextStore.record_usage)."""
    core = writer.core
    who = actor
    version, counted_tokens, sent = sent_with(prompt, version, counted_tokens, sent)
    at_sent = None if version is None else core.context_at(cid, version)
    items = None
    if sent is not None:
        # The named messages are checked against the version that was sent.
        at_sent = at_sent or core.head(cid)
        items = sent_items(at_sent, None, sent)

    def command(c: Context) -> list[str]:
        at = at_sent or c
        counted = at.tokens + REPLY_PRIMING if counted_tokens is None else counted_tokens
        c.record_usage(
            for_version=at.version, model=model, prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens, counted_tokens=counted,
            estimated=at.estimated > 0, sent=items, actor=who, latency=latency,
        )  # fmt: skip
        return []

    return writer.command(cid, None, command)


def report(
    core: StoreCore, cid: UUID | None, model: str | None, tenant: str | None = None
) -> list[ModelUsage]:
    """Per model: the provider's prompt tokens against ctxstore's counts (of one context, or
    of every context, or of one tenant's)."""
    return usage_by_model(usage_events(core, cid, model, tenant))


def usage_events(
    core: StoreCore, cid: UUID | None, model: str | None, tenant: str | None = None
) -> list[Context.UsageRecorded]:
    """The usage records a report folds (a sharded store folds every server's at once)."""
    if cid is not None:
        events: Iterable[Context.Event] = core.events(cid)
    else:
        events = core.all_of(Context.UsageRecorded)
    return [
        e
        for e in events
        if isinstance(e, Context.UsageRecorded)
        and (model is None or e.model == model)
        and (tenant is None or core.tenant_of(e.originator_id) == tenant)
    ]
