"""Reads of one context: the visible context (now or then), prompts, history, token series."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from uuid import UUID

from ctxstore.adapters.store.core import StoreCore
from ctxstore.adapters.store.results import (
    BatchFrame,
    HistoryEntry,
    Prompt,
    TokenSeries,
    VisibleContext,
)
from ctxstore.domain.context import JSON, Context
from ctxstore.domain.errors import ContextNotFoundError, InvalidOperationError
from ctxstore.domain.json_values import json_copy
from ctxstore.domain.limits import check_int, strict_int
from ctxstore.domain.packing import Resource
from ctxstore.domain.plain import is_record
from ctxstore.domain.prompt import (
    OmittedMessage,
    PromptItem,
    PromptUnits,
    Similarity,
    Strategy,
    build_prompt,
    lexical_similarity,
    prompt_units,
)
from ctxstore.domain.stream_repair import repair
from ctxstore.domain.streaming import INCOMPLETE
from ctxstore.domain.tokens import REPLY_PRIMING, TextCounter, message_cost, message_tokens
from ctxstore.projections.history import event_type_filter, fold_history
from ctxstore.projections.tokens import MAX_POINTS, fold_tokens, token_series
from ctxstore.projections.visible import batch_stack, visible_of


def visible(
    core: StoreCore, cid: UUID, at_version: int | None, at_time: datetime | None
) -> VisibleContext:
    """The visible context now, at a past version, or as it was at a time."""
    if at_time is not None:
        if at_version is not None:
            raise InvalidOperationError("give at_version or at_time, not both")
        at_version = core.version_at_time(cid, at_time)
    if at_version is None:
        held = core.cache.held(cid)
        with held.lock:
            ctx = core.fresh(cid, held)
            return visible_of(ctx, [i.message for i in core.prompt_items(ctx, held)])
    ctx = core.context_at(cid, at_version)
    return visible_of(ctx, [i.message for i in core.prompt_items(ctx)])


def sendable(items: list[PromptItem]) -> list[PromptItem]:
    """The messages a prompt may hold: records are kept in the history, never sent."""
    return [i for i in items if not is_record(i.message)]


def visible_messages(core: StoreCore, cid: UUID, last: int | None) -> list[JSON]:
    """The visible messages as stored JSON (copies), or only the newest `last`."""
    held = core.cache.held(cid)
    with held.lock:
        ctx = core.fresh(cid, held)
        order = ctx.order if last is None else ctx.order[-last:] if last > 0 else []
        return [json_copy(ctx.stored_message(i)) for i in order]


def head_size(core: StoreCore, cid: UUID) -> tuple[int, int]:
    """The visible context's prompt tokens and message count, without building it."""
    held = core.cache.held(cid)
    with held.lock:
        ctx = core.fresh(cid, held)
        return ctx.tokens + REPLY_PRIMING, len(ctx.order)


def batches(core: StoreCore, cid: UUID) -> list[BatchFrame]:
    held = core.cache.held(cid)
    with held.lock:
        return batch_stack(core.fresh(cid, held))


def prompt(
    core: StoreCore,
    cid: UUID,
    budget: int,
    strategy: Strategy | None,
    *,
    query: str | None = None,
    resources: Sequence[Resource | JSON] = (),
    safety: float | None = None,
    at_version: int | None = None,
    similarity: Similarity | None = None,
) -> Prompt:
    """What to send under `budget` tokens (see ContextStore.build_prompt)."""
    config = core.settings.prompt
    if safety is not None:
        if isinstance(safety, bool) or not isinstance(safety, int | float) or not 0 < safety <= 1:
            raise InvalidOperationError(f"safety must be in (0, 1], got {safety!r}")
        config = config.model_copy(update={"safety": float(safety)})
    units: PromptUnits
    if at_version is None:
        held = core.cache.held(cid)
        with held.lock:
            ctx = core.fresh(cid, held)
            if held.units is None or held.units[0] != ctx.version:
                # Grouping 10,000 messages costs about as much as choosing among them:
                # do it once per version of the context.
                held.units = (ctx.version, prompt_units(sendable(core.prompt_items(ctx, held))))
            units = held.units[1]
    else:
        ctx = core.context_at(cid, at_version)
        units = prompt_units(sendable(core.prompt_items(ctx)))
    counter = core.counter(ctx)
    built = build_prompt(
        units,
        budget,
        count=lambda m: message_tokens(m.model_dump(mode="json"), counter),
        config=config,
        strategy=strategy,
        query=query,
        resources=[resource(r, counter) for r in resources],
        similarity=similarity or lexical_similarity,
        estimated=ctx.estimated > 0 or not counter.exact,
    )
    return repaired_prompt(built, ctx, counter).model_copy(update={"version": ctx.version})


def repaired_prompt(built: Prompt, ctx: Context, counter: TextCounter) -> Prompt:
    """A prompt holding a reply that did not finish streaming, with it repaired
    (domain/stream_repair.py): what was dropped said in `omitted`, the totals recounted."""
    incomplete = [m for m in built.messages if INCOMPLETE in m.metadata]
    if not incomplete:
        return built
    messages, notes = repair(built.messages)
    kept = {id(m) for m in messages}
    changed = [m for m in incomplete if id(m) not in kept]
    if not changed:
        return built  # every incomplete message is sent as it stands
    before = sum(ctx.tokens_of(str(m.id)) for m in changed)
    ids = {m.id for m in changed}
    after = sum(
        message_cost(m.model_dump(mode="json"), counter)[0] for m in messages if m.id in ids
    )
    omitted = [*built.omitted, *(OmittedMessage(str(n["id"]), f"{n['what']}: {n['why']}")
                                 for n in notes)]  # fmt: skip
    return built.model_copy(update={
        "messages": messages, "omitted": omitted, "tokens": built.tokens - before + after,
        "message_tokens": built.message_tokens - before + after,
    })  # fmt: skip


def resource(raw: Resource | JSON, counter: TextCounter) -> Resource:
    """An optional prompt resource from {"id", "tokens" or "text", "priority"}."""
    if isinstance(raw, Resource):
        return raw
    if not isinstance(raw, dict) or not isinstance(raw.get("id"), str):
        raise InvalidOperationError(f"a resource needs an 'id' string, got {raw!r:.80}")
    tokens = raw.get("tokens")
    if tokens is None and isinstance(raw.get("text"), str):
        tokens = counter.count(raw["text"])
    if not strict_int(tokens) or tokens < 0:
        raise InvalidOperationError(
            f"resource {raw['id']!r} needs 'tokens' (a count >= 0) or 'text'"
        )
    priority = raw.get("priority", 0)
    if not strict_int(priority):
        raise InvalidOperationError(f"resource {raw['id']!r}: priority must be an integer")
    return Resource(raw["id"], tokens, priority)


def history(
    core: StoreCore,
    cid: UUID,
    *,
    types: Sequence[str] | None,
    actor: str | None,
    from_version: int | None,
    to_version: int | None,
    changes: bool,
) -> list[HistoryEntry]:
    """Every event of a context in order, filtered (see ContextStore.history)."""
    wanted = event_type_filter(types)
    for name, bound in (("from_version", from_version), ("to_version", to_version)):
        if bound is not None:
            check_int(bound, name)
    entries = fold_history(core.events(cid), changes=changes)
    return [
        h
        for h in entries
        if (wanted is None or h.type in wanted)
        and (actor is None or h.actor == actor)
        and (from_version is None or h.version >= from_version)
        and (to_version is None or h.version <= to_version)
    ]


def tokens_over_versions(core: StoreCore, cid: UUID, points: int) -> TokenSeries:
    """Visible tokens over every version, thinned to at most `points`, folded incrementally."""
    if not strict_int(points) or not 2 <= points <= MAX_POINTS:
        raise InvalidOperationError(f"points must be between 2 and {MAX_POINTS}, got {points!r}")
    held = core.cache.held(cid)
    with held.lock:
        head = core.fresh(cid, held).version
    with held.series_lock:  # folds apart from the context's lock: never holds up its writers
        folded = held.series
        if folded is not None and folded.ctx.version > head:
            folded = None  # the fold is ahead of this process's view: start again
        done = 0 if folded is None else folded.ctx.version
        if done < 2:
            folded, done = None, 0  # (a fold that stopped at the creation starts again)
        if head > done:
            # From the start, through core.events: a bounded history's checkpoint stands in
            # for its removed versions (a fold that is past them reads only what follows).
            events = (
                (e for e in core.events(cid) if e.originator_version <= head)
                if done < 2
                else core.storage.events.get(cid, gt=done, lte=head)
            )
            folded = fold_tokens((e for e in events if isinstance(e, Context.Event)), folded)
        if folded is None:
            raise ContextNotFoundError(f"no context with id {cid}")
        held.series = folded
        return token_series(cid, folded, points)
