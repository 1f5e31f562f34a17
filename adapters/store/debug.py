"""Replay debugging: step through a context, diff two versions, fork, and model calls."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple
from uuid import UUID

from pydantic import BaseModel, ConfigDict

from ctxstore.domain.context import JSON, Context
from ctxstore.domain.errors import InvalidOperationError, UnknownMessageError
from ctxstore.domain.messages import Message, parse_message
from ctxstore.domain.prompt import Prompt
from ctxstore.projections.changes import Diff, apply_event, compare
from ctxstore.projections.history import HistoryEntry, fold_history
from ctxstore.projections.visible import VisibleContext, visible_of

if TYPE_CHECKING:
    from ctxstore.adapters.store.facade import ContextStore


class ReplayStep(NamedTuple):
    """One event and the visible context right after it (`calls`: model calls that sent it)."""

    event: HistoryEntry
    visible: VisibleContext
    calls: list[int]


class ModelCall(BaseModel):
    """A model call recorded against a context: what was sent, and what the provider billed."""

    model_config = ConfigDict(frozen=True)

    number: int  # 1 for the context's first recorded call
    context_id: UUID
    version: int  # of the usage event
    for_version: int  # the context version the messages came from
    timestamp: datetime
    actor: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    counted_tokens: int
    estimated: bool
    whole_context: bool  # the whole visible context was sent (no built prompt recorded)
    messages: list[Message] | None = None  # exactly what was sent, where asked for


def _check_version(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidOperationError(f"{name} must be a positive integer, got {value!r}")
    return value


def replay(
    store: ContextStore,
    context_id: UUID | str,
    *,
    from_version: int = 1,
    to_version: int | None = None,
) -> Iterator[ReplayStep]:
    """Each event from `from_version` to `to_version` with the visible context after it."""
    cid = store.context_uuid(context_id)
    _check_version(from_version, "from_version")
    events = list(store.context_events(cid))
    head = len(events)
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
    ctx: Context | None = None if from_version == 1 else store.context_at(cid, from_version - 1)
    parsed: dict[str, tuple[int, Message]] = {}
    for e in events[from_version - 1 : last]:
        ctx, change = apply_event(ctx, e)
        messages = []
        for i in ctx.order:
            entry = ctx.entries[i]
            hit = parsed.get(i)
            if hit is None or hit[0] != entry["version"]:
                hit = parsed[i] = (entry["version"], Message.model_validate(entry["message"]))
            messages.append(hit[1])
        entry_h = history[e.originator_version - 1].model_copy(update={"changes": change})
        yield ReplayStep(entry_h, visible_of(ctx, messages), calls.get(e.originator_version, []))


def diff(store: ContextStore, context_id: UUID | str, v1: int, v2: int) -> Diff:
    """Messages added, removed and changed from version v1 to v2, and the token delta."""
    cid = store.context_uuid(context_id)
    a = store.context_at(cid, _check_version(v1, "from version"))
    b = store.context_at(cid, _check_version(v2, "to version"))
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
    store: ContextStore,
    context_id: UUID | str,
    *,
    at_version: int | None = None,
    name: str | None = None,
    metadata: JSON | None = None,
    actor: str,
) -> UUID:
    """A new context starting as a copy of another's visible context; returns its id."""
    cid = store.context_uuid(context_id)
    source = store.context_at(cid, at_version) if at_version is not None else store.head(cid)
    forked = Context.start(
        name=name if name is not None else (f"fork of {source.name}" if source.name else None),
        metadata=source.metadata if metadata is None else metadata,
        encoding=source.encoding,
        actor=actor,
        tenant=source.tenant,  # a fork stays with its source's owner
    )
    forked.fork_from(source, actor=actor)
    store.store_new(forked)
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
            if s not in at.entries:
                raise UnknownMessageError(f"message {s!r} was not visible at version {at.version}")
            items.append({"id": s})
        elif isinstance(s, Message | dict):
            dumped = (s if isinstance(s, Message) else parse_message(s)).model_dump(mode="json")
            stored = at.entries.get(dumped.get("id") or "")
            # A message sent as stored is named by id; one the prompt builder wrote is kept.
            same = stored is not None and stored["message"] == dumped
            items.append({"id": dumped["id"]} if same else {"message": dumped})
        else:
            raise InvalidOperationError(f"not a message id or a message: {s!r:.80}")
    return items


def model_calls(
    store: ContextStore, context_id: UUID | str, number: int | None = None
) -> list[ModelCall]:
    """The model calls recorded against a context; with `number`, that call with its messages."""
    cid = store.context_uuid(context_id)
    usage = [e for e in store.context_events(cid) if isinstance(e, Context.UsageRecorded)]
    if number is not None:
        if isinstance(number, bool) or not isinstance(number, int) or number == 0:
            raise InvalidOperationError(
                f"a call number is 1, 2, ... (or -1 the last), got {number!r}"
            )
        if not -len(usage) <= number <= len(usage):
            raise InvalidOperationError(
                f"context {cid} has {len(usage)} recorded call(s), not a call {number}"
            )
        n = number if number > 0 else len(usage) + number + 1
        e = usage[n - 1]
        return [_call(n, e, _sent_messages(store, cid, e))]
    return [_call(n, e, None) for n, e in enumerate(usage, 1)]


def _sent_messages(store: ContextStore, cid: UUID, e: Context.UsageRecorded) -> list[Message]:
    at = store.context_at(cid, e.for_version)
    if e.sent is None:
        return at.visible_messages()
    return [
        Message.model_validate(at.entries[s["id"]]["message"] if "id" in s else s["message"])
        for s in e.sent
    ]


def _call(n: int, e: Context.UsageRecorded, messages: list[Message] | None) -> ModelCall:
    return ModelCall(
        number=n,
        context_id=e.originator_id,
        version=e.originator_version,
        for_version=e.for_version,
        timestamp=e.timestamp,
        actor=e.actor,
        model=e.model,
        prompt_tokens=e.prompt_tokens,
        completion_tokens=e.completion_tokens,
        counted_tokens=e.counted_tokens,
        estimated=e.estimated,
        whole_context=e.sent is None,
        messages=messages,
    )
