"""Compaction orchestration: plan from the cached context, summarize outside its lock,
write one compress event in whatever batch is current (it opens and leaves no batch), plan
again if the context moved meanwhile."""

from __future__ import annotations

import logging
from typing import Any
from uuid import UUID

from ctxstore.adapters.llm.summarizers import ExtractiveSummarizer, OpenAISummarizer
from ctxstore.adapters.store import reads
from ctxstore.adapters.store.core import StoreCore
from ctxstore.adapters.store.results import Compaction, Prompt
from ctxstore.adapters.store.writer import MAX_ATTEMPTS, Writer
from ctxstore.domain.compaction import (
    Entry,
    plan_compaction,
    summary_message,
    too_little_saved,
)
from ctxstore.domain.context import JSON, Context
from ctxstore.domain.errors import NothingToSummarizeError, VersionConflictError
from ctxstore.domain.prompt import Strategy
from ctxstore.domain.summarize import Summarizer, compaction_stats, summarize_with_bisect
from ctxstore.domain.tokens import REPLY_PRIMING, message_cost
from ctxstore.domain.transcript import blocks_of

log = logging.getLogger(__name__)


def planner_entries(ctx: Context) -> list[Entry]:
    """The visible messages as the planner sees them; a block's later members (results,
    a Responses turn's further calls, the item a reasoning item led to) are "tool" to it,
    so that a round never splits a block."""
    block_of = blocks_of(ctx.order, ctx.messages_by_id())
    entries: list[Entry] = []
    previous: int | None = None
    for i in ctx.order:
        block = block_of.get(i)
        inside = block is not None and block == previous
        entries.append(Entry(i, "tool" if inside else ctx.role_of(i), ctx.is_summary(i)))
        previous = block
    return entries


def configured_summarizer(core: StoreCore) -> Summarizer:
    """The configured summarizer: offline extractive by default, or an OpenAI-compatible model."""
    cfg = core.settings.compaction
    if cfg.summarizer == "openai":
        return OpenAISummarizer(cfg.model, base_url=cfg.base_url, api_key=cfg.api_key)
    return ExtractiveSummarizer(core.tokenizers.counter(core.settings.encoding))


def compact(
    core: StoreCore,
    writer: Writer,
    cid: UUID,
    *,
    trigger: str,
    actor: str,
    dry_run: bool = False,
    summarizer: Summarizer | None = None,
) -> Compaction:
    """Summarize the older half of the rounds since the latest summary (ContextStore.compact)."""
    cfg = core.settings.compaction
    writes = summarizer or configured_summarizer(core)
    for _ in range(MAX_ATTEMPTS):
        held = core.cache.held(cid)
        with held.lock:
            ctx = core.fresh(cid, held)
            version, before = ctx.version, ctx.tokens + REPLY_PRIMING
            entries = planner_entries(ctx)
            sizes = {i: ctx.tokens_of(i) for i in ctx.order}
            counter = core.counter(ctx)
            by_id = {item.message.id: item.message for item in core.prompt_items(ctx, held)}
        try:
            plan = plan_compaction(entries, min_rounds=cfg.min_rounds)
        except NothingToSummarizeError as exc:
            if not dry_run:
                raise
            # A dry run answers what a compaction would do: here, nothing, and why.
            return Compaction(
                context_id=cid, trigger=trigger, plan={}, replaced=[], skipped=str(exc),
                dry_run=True, tokens_before=before,
            )  # fmt: skip
        base: dict[str, Any] = {
            "context_id": cid,
            "trigger": trigger,
            "plan": plan.as_dict(),
            "replaced": plan.summarize,
        }
        if plan.skipped is not None or dry_run:
            return Compaction(**base, skipped=plan.skipped, dry_run=dry_run, tokens_before=before)
        result = summarize_with_bisect(
            [by_id[i] for i in plan.summarize],
            writes,
            target_tokens=cfg.target_tokens,
            max_depth=cfg.max_depth,
            min_chunk_messages=cfg.min_chunk_messages,
        )
        stats = compaction_stats(result, writes, plan.as_dict(), trigger, before)
        summary = summary_message(result.text)
        replaced = sum(sizes[i] for i in plan.summarize)
        small = too_little_saved(replaced, message_cost(summary, counter)[0], cfg.min_saving)
        if small is not None:  # a summary as large as what it covers only loses detail
            return Compaction(**base, skipped=small, tokens_before=before)

        def write(
            c: Context, ids: list[str] = plan.summarize, text: JSON = summary, facts: JSON = stats
        ) -> str:
            return c.compress(ids, text, stats=facts, actor=actor, counter=core.counter(c))

        try:
            w = writer.command(cid, version, write)
        except VersionConflictError:
            continue  # the context moved while the summary was written: plan again
        return Compaction(
            **base, summary_id=w.ids[0], version=w.version, batch=w.batch,
            tokens_before=before, tokens_after=w.tokens, stats=stats,
        )  # fmt: skip
    raise VersionConflictError(f"context {cid}: kept changing during {MAX_ATTEMPTS} compactions")


def crossed(core: StoreCore, tokens: int, messages: int) -> bool:
    """Whether a visible context this size crossed a proactive compaction threshold."""
    cfg = core.settings.compaction
    return tokens >= cfg.max_context_tokens or messages >= cfg.message_limit


def compact_proactively(
    core: StoreCore, writer: Writer, cid: UUID, actor: str
) -> Compaction | None:
    try:
        done = compact(core, writer, cid, trigger="proactive", actor=actor)
    except NothingToSummarizeError:
        return None
    return None if done.skipped else done


def compact_after_write(core: StoreCore, writer: Writer, cid: UUID, actor: str) -> None:
    """Compact proactively after a stored write. The write is stored whatever happens
    here: a failure (the summarizer's, the store's) is logged, never reported as the
    write's, which a caller would then retry and store twice."""
    try:
        compact_proactively(core, writer, cid, actor)
    except Exception:
        log.warning("context %s: stored; compacting after the write failed", cid, exc_info=True)


def recover(
    core: StoreCore,
    writer: Writer,
    cid: UUID,
    budget: int,
    strategy: Strategy | None,
    actor: str,
    prompt_options: dict[str, Any],
) -> Prompt:
    """Compact while the head exceeds the budget's limit (at most 3 times), then the prompt."""
    safety = prompt_options.get("safety") or core.settings.prompt.safety
    for _ in range(3):
        if reads.head_size(core, cid)[0] <= int(budget * safety):
            break
        try:
            done = compact(core, writer, cid, trigger="overflow_retry", actor=actor)
        except NothingToSummarizeError:
            break
        if done.skipped:
            break
    return reads.prompt(core, cid, budget, strategy, **prompt_options)
