"""Recording a captured model call (domain/captured.py): a usage event holding the call as
the provider received it, the messages it sent read from its request, and the reply's usage
where the capture did not name it. Nothing is inserted into the context."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID

from ctxstore.adapters.store.core import StoreCore
from ctxstore.adapters.store.responses import read_response
from ctxstore.adapters.store.results import Written
from ctxstore.adapters.store.writer import Writer
from ctxstore.domain.captured import CapturedCall, request_messages
from ctxstore.domain.context import JSON, Context
from ctxstore.domain.errors import CtxStoreError, InvalidOperationError
from ctxstore.domain.message_input import parse_message
from ctxstore.domain.messages import Message
from ctxstore.domain.tokens import REPLY_PRIMING, message_cost


def as_call(call: CapturedCall | JSON) -> CapturedCall:
    """A CapturedCall from one or its JSON, refused with a typed error naming the field."""
    if isinstance(call, CapturedCall):
        found = call
    elif isinstance(call, dict):
        try:
            found = CapturedCall.model_validate(call)
        except ValueError as exc:  # pydantic's, naming each field
            raise InvalidOperationError(f"not a captured call: {exc}") from None
    else:
        raise InvalidOperationError(
            f"a captured call is a CapturedCall or a dict, got {call!r:.80}"
        )
    found.check()
    return found


def sent_messages(call: CapturedCall) -> list[Message]:
    """The messages the call's request sent, each as a message of its API's shape; an item
    no shape reads (a provider's newer item type) is left out of this view only: the
    request itself is kept whole."""
    found = []
    for m in request_messages(call.api_of(), call.request):
        try:
            found.append(parse_message(m))
        except CtxStoreError:
            continue
    return found


def reply_of(call: CapturedCall) -> tuple[list[JSON], str | None, int | None, int | None]:
    """(output messages, model, prompt tokens, completion tokens) of the call's reply,
    where it reads as one of the four APIs' replies."""
    if call.response is None:
        return [], None, None, None
    try:
        _, output, model, prompt, completion = read_response(call.response)
    except CtxStoreError:
        return [], None, None, None
    return output, (None if model == "unknown" else model), prompt, completion


# Records a call into the context: made with the context at a version (None: its own
# for_version, else the version its content last changed at) whose token count, when that
# version is not yet stored (an earlier event of the same write), is given.
CallStep = Callable[[Context, int | None, tuple[int, bool] | None], None]


def planned_call(
    core: StoreCore, given: CapturedCall | JSON, *, actor: str
) -> tuple[int | None, CallStep]:
    """What recording a captured call does to a context, checked and read before the write:
    (its reply's position among messages inserted with it, a step that records it). A
    reconstructed call records no copy of what was sent: it was the context at its
    version."""
    call = as_call(given)
    sent = None if call.reconstructed else sent_messages(call)
    _, reply_model, reply_prompt, reply_completion = reply_of(call)
    model = call.model or reply_model or str(call.request.get("model") or "unknown")
    prompt = call.prompt_tokens if call.prompt_tokens is not None else reply_prompt or 0
    completion = (
        call.completion_tokens if call.completion_tokens is not None else reply_completion or 0
    )
    record = call.record()
    items = None if sent is None else [{"message": m.model_dump(mode="json")} for m in sent]

    def step(c: Context, version: int | None, counted_at: tuple[int, bool] | None) -> None:
        if version is None:
            version = _content_version(c) if call.for_version is None else call.for_version
        version = min(version, c.version)
        counted, estimated = REPLY_PRIMING, False
        if items is None:  # the whole context at that version was sent
            if counted_at is not None:
                counted, estimated = counted_at[0] + REPLY_PRIMING, counted_at[1]
            else:
                at = c if version == c.version else core.context_at(c.id, version)
                counted, estimated = at.tokens + REPLY_PRIMING, at.estimated > 0
        else:
            counter = core.counter(c)
            for m in items:
                cost, guessed = message_cost(m["message"], counter)
                counted, estimated = counted + cost, estimated or guessed
        # What was sent is read from the request kept in the record (messages_sent): the
        # event holds no second copy of it.
        c.record_call(
            record, for_version=version, model=model[:200], prompt_tokens=prompt,
            completion_tokens=completion, counted_tokens=counted, estimated=bool(estimated),
            sent=None, actor=actor, latency=call.latency,
        )  # fmt: skip

    return call.reply_at, step


def record_call(writer: Writer, cid: UUID, given: CapturedCall | JSON, *, actor: str) -> Written:
    """Record a captured call against the context (see ContextStore.record_call)."""
    _, step = planned_call(writer.core, given, actor=actor)

    def command(c: Context) -> list[str]:
        step(c, None, None)
        return []

    return writer.command(cid, None, command)


def _content_version(c: Context) -> int:
    """The version the context's content last changed at (usage records after it do not
    change what a call was sent)."""
    run = c.usage_run
    return run[0] if run is not None and run[1] == c.version else c.version


def messages_sent(record: JSON | None) -> list[Message] | None:
    """The messages a captured call's request sent, read from the request it keeps (None:
    not a captured call, or a reconstructed one: it sent the context at its version)."""
    if record is None or record.get("reconstructed") or not isinstance(record.get("request"), dict):
        return None
    found = []
    for m in request_messages(record.get("api"), record["request"]):
        try:
            found.append(parse_message(m))
        except CtxStoreError:
            continue
    return found


def captured_reply(record: JSON | None) -> list[Message] | None:
    """A captured call's reply as messages (None: not a captured call)."""
    if record is None:
        return None
    response: Any = record.get("response")
    if response is None:
        return []
    try:
        _, output, _, _, _ = read_response(response)
    except CtxStoreError:
        return []
    found = []
    for m in output:
        try:
            found.append(parse_message(m))
        except CtxStoreError:
            continue
    return found
