"""Replay debugging: step through a context, diff two versions, fork, and model calls."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any
from uuid import UUID

from ctxstore.adapters.store.core import StoreCore
from ctxstore.adapters.store.results import ReplayStep
from ctxstore.adapters.store.writer import Writer
from ctxstore.domain.context import JSON, Context
from ctxstore.domain.errors import InvalidOperationError, UnknownMessageError
from ctxstore.domain.limits import strict_int
from ctxstore.domain.message_input import parse_message
from ctxstore.domain.messages import Message
from ctxstore.domain.prompt import Prompt
from ctxstore.projections.changes import Diff, apply_event, compare
from ctxstore.projections.history import fold_history
from ctxstore.projections.visible import visible_of


def _check_version(value: object, name: str) -> int:
    if not strict_int(value) or value < 1:
        raise InvalidOperationError(f"{name} must be a positive integer, got {value!r}")
    return value


def replay(
    core: StoreCore,
    context_id: UUID | str,
    *,
    from_version: int = 1,
    to_version: int | None = None,
) -> Iterator[ReplayStep]:
    """Each event from `from_version` to `to_version` with the visible context after it."""
    cid = core.id(context_id)
    _check_version(from_version, "from_version")
    events = list(core.events(cid))
    head = events[-1].originator_version  # (a bounded history skips versions: not len())
    last = head if to_version is None else _check_version(to_version, "to_version")
    if last > head or from_version > last:
        raise InvalidOperationError(
            f"cannot replay versions {from_version}..{last} of context {cid}: "
            f"it has versions 1..{head}"
        )
    history = fold_history(events)
    calls: dict[int, list[int]] = {}
    for h in history:
        if h.type == "usage":
            calls.setdefault(h.details["for_version"], []).append(h.details["call"])
    # Start from the nearest snapshot before the range, not from the first event.
    ctx: Context | None = None if from_version == 1 else core.context_at(cid, from_version - 1)
    parsed: dict[str, tuple[int, Message]] = {}
    steps = [(e, h) for e, h in zip(events, history, strict=True)
             if from_version <= e.originator_version <= last]  # fmt: skip
    for e, h in steps:
        ctx, change = apply_event(ctx, e)
        messages = []
        for i in ctx.order:
            version = ctx.entry_version(i)
            hit = parsed.get(i)
            if hit is None or hit[0] != version:
                hit = parsed[i] = (version, Message.model_validate(ctx.stored_message(i)))
            messages.append(hit[1])
        entry_h = h.model_copy(update={"changes": change})
        yield ReplayStep(entry_h, visible_of(ctx, messages), calls.get(e.originator_version, []))


def diff(core: StoreCore, context_id: UUID | str, v1: int, v2: int) -> Diff:
    """Messages added, removed and changed from version v1 to v2, and the token delta."""
    cid = core.id(context_id)
    a = core.context_at(cid, _check_version(v1, "from version"))
    b = core.context_at(cid, _check_version(v2, "to version"))
    added, removed, changed = compare((a.order, a.entries), (b.order, b.entries), full=True)
    before, after = visible_of(a).tokens, visible_of(b).tokens
    return Diff(
        context_id=str(cid),
        from_version=v1,
        to_version=v2,
        added=added,
        removed=removed,
        changed=changed,
        tokens_before=before,
        tokens_after=after,
        tokens_delta=after - before,
    )


def fork_context(
    writer: Writer,
    context_id: UUID | str,
    *,
    at_version: int | None = None,
    name: str | None = None,
    metadata: JSON | None = None,
    actor: str,
) -> UUID:
    """A new context starting as a copy of another's visible context; returns its id."""
    core = writer.core
    cid = core.id(context_id)
    source = core.context_at(cid, at_version) if at_version is not None else core.head(cid)
    forked = Context.start(
        name=name if name is not None else (f"fork of {source.name}" if source.name else None),
        metadata=source.metadata if metadata is None else metadata,
        encoding=source.encoding,
        actor=actor,
        tenant=source.tenant,  # a fork stays with its source's owner
    )
    forked.fork_from(source, actor=actor)
    writer.store_new(forked)
    return forked.id


def sent_items(at: Context, prompt: Prompt | None, sent: Sequence[Any] | None) -> list[JSON] | None:
    """What a call made with the context `at` sent, as usage events record it: ids of its
    visible messages, or messages."""
    if prompt is not None:
        if sent is not None:
            raise InvalidOperationError("give a prompt or the messages sent, not both")
        sent = prompt.messages
    if sent is None:
        return None
    if isinstance(sent, str | bytes) or not isinstance(sent, Sequence):
        raise InvalidOperationError("sent must be a list of message ids or messages")
    items: list[JSON] = []
    for s in sent:
        if isinstance(s, str):
            if not at.has_message(s):
                raise UnknownMessageError(f"message {s!r} was not visible at version {at.version}")
            items.append({"id": s})
        elif isinstance(s, Message | dict):
            dumped = (s if isinstance(s, Message) else parse_message(s)).model_dump(mode="json")
            known = dumped.get("id") or ""
            # A message sent as stored is named by id; one the prompt builder wrote is kept.
            same = at.has_message(known) and at.stored_message(known) == dumped
            items.append({"id": dumped["id"]} if same else {"message": dumped})
        else:
            raise InvalidOperationError(f"not a message id or a message: {s!r:.80}")
    return items
