"""Messages of any shape as Chat Completions takes them, and a chat message as the other
shapes' converters read it (domain/conversions.py says what crosses)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ctxstore.domain.conversion_losses import JSON, Conversion
from ctxstore.domain.shapes.names import CHAT

if TYPE_CHECKING:
    from ctxstore.domain.messages import Message
    from ctxstore.domain.shapes.base import Source


def to_chat(messages: Sequence[Message], source: Source, exact: bool) -> Conversion:
    """The messages as chat messages (`exact`: a chat message key for key as it was given)."""
    done = Conversion(CHAT, [])
    for m in messages:
        if exact and m.native is None:
            done.payload.append(m.as_given())
            continue
        converted = source(m).to_chat(m, done)
        if m.native is not None:
            done.check(m, m.native, converted)
        done.payload.extend(converted)
    return done


def modern(m: Message, done: Conversion) -> list[JSON]:
    """A chat message as the other shapes' converters read it: a legacy `function_call` as
    a tool call, and the `function` message answering it as a tool result, paired by an id
    made from the calling message's id (the legacy form has none)."""
    chat = m.to_openai()
    legacy = chat.pop("function_call", None)
    if legacy is not None:
        call_id = "call_" + re.sub(r"[^A-Za-z0-9_-]", "_", m.id or legacy["name"])
        done.legacy[legacy["name"]] = call_id
        call = {"id": call_id, "type": "function", "function": legacy}
        chat["tool_calls"] = [*chat.get("tool_calls", []), call]
    if chat["role"] == "function":
        name = chat.pop("name")
        call_id = done.legacy.pop(name, "call_" + re.sub(r"[^A-Za-z0-9_-]", "_", name))
        chat = {"role": "tool", "tool_call_id": call_id, "content": chat.get("content") or ""}
    return [chat]
