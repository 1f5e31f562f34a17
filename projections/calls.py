"""Model calls recorded against a context: what was sent, and what the provider billed."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime
from difflib import SequenceMatcher
from typing import Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict

from ctxstore.domain.context import Context
from ctxstore.domain.messages import Message
from ctxstore.projections.audit import AuditEntry
from ctxstore.projections.changes import preview


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
    # What the call answered, where asked for: the messages written after the version the
    # call was made with and up to its usage record (record_response writes both at once).
    response: list[Message] | None = None
    latency_ms: float | None = None  # the call's duration, where the caller recorded it
    cost: float | None = None  # USD, when a price table names the model (Settings.prices)
    # A captured call (domain/captured.py): what captured it, and the bodies as the
    # provider received and answered them (where asked for, as `messages` is).
    source: str | None = None  # agents, langchain, adk, otel, ...; None: recorded by hand
    call_id: str | None = None
    api: str | None = None  # openai.responses, openai.chat, anthropic.messages, ...
    failed: bool = False  # the call failed: `error` says how; no reply
    error: str | None = None
    streamed: bool = False
    started_at: datetime | None = None
    reconstructed: bool = False  # read back from a transcript, not seen on its way out
    request: dict[str, Any] | None = None  # the request body exactly as sent
    response_body: dict[str, Any] | None = None  # the reply as received (a stream whole)


class PromptChange(BaseModel):
    """A message as a prompt diff lists it."""

    model_config = ConfigDict(frozen=True)

    id: str
    role: str
    preview: str


class PromptDiff(BaseModel):
    """What changed in what was sent between a call and the one before it: compaction,
    rollback or editing between two calls, message by message."""

    model_config = ConfigDict(frozen=True)

    context_id: UUID
    number: int
    previous: int | None  # the call compared with; None for the first call (all added)
    added: list[PromptChange]
    removed: list[PromptChange]
    changed: list[PromptChange]  # as this call sent them
    unchanged: int
    tokens_before: int  # ctxstore's count of the previous call's prompt (0 for the first)
    tokens_after: int


def call_of_entry(n: int, e: AuditEntry) -> ModelCall:
    """Call number `n` of a context from its usage record's audit entry (no messages)."""
    d = e.details
    return ModelCall(
        number=n, context_id=e.context_id, version=e.version, for_version=d["for_version"],
        timestamp=e.timestamp, actor=e.actor, model=d["model"],
        prompt_tokens=d["prompt_tokens"], completion_tokens=d["completion_tokens"],
        counted_tokens=d["counted_tokens"], estimated=d["estimated"],
        whole_context=d.get("sent") is None
        and (not isinstance(d.get("captured"), dict) or bool(d["captured"].get("reconstructed"))),
        latency_ms=d.get("latency_ms"),  # indexed before calls recorded it: none
        **_captured(d.get("captured")),
    )  # fmt: skip


def _captured(found: Any) -> dict[str, Any]:
    """A captured call's own fields, from its record or the audit index's summary of it."""
    if not isinstance(found, dict):
        return {}
    started = found.get("started_at")
    return {
        "source": found.get("source"), "call_id": found.get("call_id"), "api": found.get("api"),
        "error": found.get("error"), "failed": found.get("error") is not None,
        "streamed": bool(found.get("streamed")),
        "reconstructed": bool(found.get("reconstructed")),
        "started_at": None if started is None else datetime.fromisoformat(started),
    }  # fmt: skip


def model_call(
    n: int, e: Context.UsageRecorded, messages: list[Message] | None,
    response: list[Message] | None = None,
) -> ModelCall:  # fmt: skip
    """Call number `n` of a context from its usage event (with the messages sent and the
    response, if given)."""
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
        whole_context=e.sent is None and (e.call is None or bool(e.call.get("reconstructed"))),
        messages=messages,
        response=response,
        latency_ms=e.latency_ms,
        **_captured(e.call),
        request=None if e.call is None else e.call.get("request"),
        response_body=None if e.call is None else e.call.get("response"),
    )


def prompt_diff(call: ModelCall, previous: ModelCall | None) -> PromptDiff:
    """Message by message, what `call` sent against what `previous` sent (both with their
    messages). A stored message is known by its id: sent both times, it is unchanged or
    changed. Messages without one (a request's own) are aligned by content, and where a
    run of them gave way to as many of the same roles in the same place, they count as
    changed, not as removed and added."""
    before = previous.messages or [] if previous is not None else []
    after = call.messages or []
    old_ids, new_ids = _unique_ids(before), _unique_ids(after)
    added: list[PromptChange] = []
    removed: list[PromptChange] = []
    changed: list[PromptChange] = []
    unchanged = 0
    for m in after:
        if m.id not in new_ids:
            continue
        if m.id not in old_ids:
            added.append(_change(m))
        elif old_ids[m.id].stored() != m.stored():
            changed.append(_change(m))
        else:
            unchanged += 1
    removed += [_change(m) for m in before if m.id in old_ids and m.id not in new_ids]
    old = [m for m in before if m.id not in old_ids]
    new = [m for m in after if m.id not in new_ids]
    matcher = SequenceMatcher(None, [_key(m) for m in old], [_key(m) for m in new], False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        gone, came = old[i1:i2], new[j1:j2]
        if op == "equal":
            unchanged += len(came)
        elif len(gone) == len(came) and all(
            a.role == b.role for a, b in zip(gone, came, strict=True)
        ):
            changed += [_change(m) for m in came]
        else:
            removed += [_change(m) for m in gone]
            added += [_change(m) for m in came]
    return PromptDiff(
        context_id=call.context_id, number=call.number,
        previous=None if previous is None else previous.number,
        added=added, removed=removed, changed=changed, unchanged=unchanged,
        tokens_before=0 if previous is None else previous.counted_tokens,
        tokens_after=call.counted_tokens,
    )  # fmt: skip


def _unique_ids(messages: list[Message]) -> dict[str, Message]:
    """The messages of a prompt known by an id it holds once (a repeated one is aligned by
    content with the messages that have none)."""
    seen = Counter(m.id for m in messages if m.id)
    return {m.id: m for m in messages if m.id and seen[m.id] == 1}


def _key(m: Message) -> str:
    """A message's identity and content: equal keys, the same message sent alike."""
    return json.dumps([m.id, m.stored() if m.id is None else m.as_given()], sort_keys=True)


def _change(m: Message) -> PromptChange:
    return PromptChange(id=m.id or "", role=m.role, preview=preview(m.stored()))
