"""The model calls a Claude Agent SDK transcript holds: each assistant entry with its usage is
a call's reply, recorded with the append that writes it, in the same commit (one command:
the entries before it inserted, then the reply, then the call), so `calls` lists every turn.

Each call is marked reconstructed (source `claude-transcript`): it is read back from the
transcript, not seen on its way to the provider. What was sent is the transcript up to the
reply (the context at the call's `for_version`: the call records no copy of it, so an append
stays one small write however long the transcript); the system prompt and the tools are not
in the transcript, and the request says so. The SDK writes one assistant message as several
entries (one per content block) sharing its id: those appended together are one call; an
entry of a message whose call is already recorded adds none (its `call_id` is the message's).
Synthetic entries (model `<synthetic>`: an interruption, an API error the CLI wrote down) are
not model calls.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID

from ctxstore.adapters.store.captured import reply_of
from ctxstore.adapters.store.parts import StoreParts
from ctxstore.domain.captured import ANTHROPIC_API, CapturedCall
from ctxstore.domain.context import Context
from ctxstore.domain.errors import CtxStoreError
from ctxstore.domain.tokens import REPLY_PRIMING

SOURCE = "claude-transcript"
NOTE = (
    "reconstructed from the Claude Agent SDK transcript: what was sent is the transcript "
    "before this reply (the context at the call's for_version); the system prompt and the "
    "tools are not in the transcript"
)

Segment = tuple[list[dict[str, Any]], CapturedCall | None]


def _reply(entry: dict[str, Any]) -> dict[str, Any] | None:
    """The assistant message an entry holds, when it is a model call's reply with usage."""
    message = entry.get("message")
    if entry.get("type") != "assistant" or not isinstance(message, dict):
        return None
    model = message.get("model")
    if not isinstance(message.get("usage"), dict) or not isinstance(model, str):
        return None
    return None if model in ("", "<synthetic>") else message


def _call(group: list[dict[str, Any]]) -> CapturedCall | None:
    """The call whose reply these entries (one message's) hold; None when not storable."""
    messages = [m for e in group if (m := _reply(e)) is not None]
    last = messages[-1]
    content: list[Any] = []
    for m in messages:
        given = m.get("content")
        content += given if isinstance(given, list) else [{"type": "text", "text": str(given)}]
    response = {"type": "message", "role": "assistant", **last, "content": content}
    ident = last.get("id") or group[-1].get("uuid")
    try:
        call = CapturedCall(
            request={"model": last["model"], "note": NOTE}, response=response,
            api=ANTHROPIC_API, source=SOURCE, model=last["model"], reconstructed=True,
            call_id=f"claude:{ident}"[:200] if ident else f"claude:{id(group)}",
        )  # fmt: skip
        call.check()
    except (CtxStoreError, ValueError):
        return None  # (an entry is never refused for its call: the call is left out)
    return call


def planned(entries: list[dict[str, Any]]) -> list[Segment]:
    """The entries in runs to insert in order, each run of one reply followed by its call."""
    segments: list[Segment] = []
    pending: list[dict[str, Any]] = []
    i = 0
    while i < len(entries):
        reply = _reply(entries[i])
        if reply is None:
            pending.append(entries[i])
            i += 1
            continue
        j = i + 1
        while (j < len(entries) and (other := _reply(entries[j])) is not None
               and reply.get("id") is not None and other.get("id") == reply.get("id")):  # fmt: skip
            j += 1
        if pending:
            segments.append((pending, None))
            pending = []
        segments.append((entries[i:j], _call(entries[i:j])))
        i = j
    if pending:
        segments.append((pending, None))
    return segments


def insert_with_calls(
    parts: StoreParts, cid: UUID, segments: list[Segment],
    message: Callable[[dict[str, Any]], dict[str, Any]], expected_version: int,
) -> Any:  # fmt: skip
    """Insert the runs and record their calls in one command (one commit)."""
    core = parts.core
    actor = core.actor(None)
    steps = []
    for run, call in segments:
        batch = [message(e) for e in run]
        _, insert = parts.commands.insert(cid, batch, after=None, actor=None, format=None)
        steps.append((insert, call))

    def command(c: Context) -> list[str]:
        touched: list[str] = []
        for insert, call in steps:
            before, tokens, estimated = c.version, c.tokens, c.estimated > 0
            done = insert(c)
            touched += done if isinstance(done, list) else []
            if call is None:
                continue
            _, _, prompt, completion = reply_of(call)
            c.record_call(
                call.record(), for_version=before, model=(call.model or "unknown")[:200],
                prompt_tokens=prompt or 0, completion_tokens=completion or 0,
                counted_tokens=tokens + REPLY_PRIMING, estimated=estimated, sent=None,
                actor=actor,
            )  # fmt: skip
        return touched

    return parts.writer.command(cid, expected_version, command)
