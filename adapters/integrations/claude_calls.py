"""The model calls a Claude Agent SDK transcript holds: each assistant entry with its usage is
a call's reply, recorded with the append that writes it, in the same commit (the insert's
`calls`), so `calls` lists every turn.

Each call is marked reconstructed (source `claude-transcript`): it is read back from the
transcript, not seen on its way to the provider. What was sent is the transcript up to the
reply (the ids of the messages visible before it: the call records no copy of them, so an
append stays one small write however long the transcript); the system prompt and the tools are not
in the transcript, and the request says so. The SDK writes one assistant message as several
entries (one per content block) sharing its id: those appended together are one call; an
entry of a message whose call is already recorded adds none (its `call_id` is the message's).
Synthetic entries (model `<synthetic>`: an interruption, an API error the CLI wrote down) are
not model calls.
"""

from __future__ import annotations

from typing import Any

from ctxstore.domain.captured import ANTHROPIC_API, CapturedCall
from ctxstore.domain.errors import CtxStoreError

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


def transcript_calls(entries: list[dict[str, Any]]) -> list[CapturedCall]:
    """The calls the replies among the entries answered: one per assistant message (its
    entries appended together), in order."""
    calls: list[CapturedCall] = []
    i = 0
    while i < len(entries):
        reply = _reply(entries[i])
        if reply is None:
            i += 1
            continue
        j = i + 1
        while (j < len(entries) and (other := _reply(entries[j])) is not None
               and reply.get("id") is not None and other.get("id") == reply.get("id")):  # fmt: skip
            j += 1
        call = _call(entries[i:j])
        if call is not None:  # made with what the transcript held before this reply
            calls.append(call.model_copy(update={"reply_at": i}))
        i = j
    return calls
