"""Chat Completions messages (`openai-chat`), kept as their fields (domain/messages.py).

Pairing: an assistant's `tool_calls[].id` answered by tool messages right after it; a
legacy `function_call` (before calls had ids) by the `function` message naming its function.
Every other shape converts through chat; a chat message reads to them with its legacy call
as a tool call (chat_conversion.modern).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ctxstore.domain.conversion_losses import Conversion
from ctxstore.domain.images import price_openai_url
from ctxstore.domain.shapes import chat_stream
from ctxstore.domain.shapes.base import JSON, Native, Shape, Source, plain_native
from ctxstore.domain.shapes.chat_conversion import modern, to_chat
from ctxstore.domain.shapes.names import CHAT

if TYPE_CHECKING:
    from ctxstore.domain.messages import Message

RESULT_ROLES = ("tool", "function")  # chat messages answering a call (function: legacy)
LEGACY_CALL = "function:"  # the pairing id of a legacy function_call, before its name


def stored_call_parts(call: dict[str, Any]) -> tuple[str, str]:
    """A tool call as messages hold it in JSON: the tool's name, and what the call passes
    (a function's arguments, a custom tool's input)."""
    if call.get("type") == "custom":
        return call["custom"]["name"], call["custom"]["input"]
    return call["function"]["name"], call["function"].get("arguments", "")


def parts_cost(content: Any) -> tuple[int, bool]:
    """What a message's non-text parts cost, and whether that is an estimate: images by
    OpenAI's tile formula (domain/images.py; estimated when the size cannot be read from
    inline bytes), audio and files not priced (0, labelled estimated)."""
    if not isinstance(content, list):
        return 0, False
    total, estimated = 0, False
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in (None, "text", "refusal"):
            continue
        if kind == "image_url" and isinstance(part.get("image_url"), dict):
            image = part["image_url"]
            priced = price_openai_url(str(image.get("url", "")), str(image.get("detail", "auto")))
            total += priced.tokens
            estimated = estimated or priced.estimated
        else:
            estimated = True  # input_audio, file, or a part this formula does not know
    return total, estimated


class ChatShape(Shape):
    """`openai-chat`: what a message is when no other shape claims it."""

    name = CHAT
    native = False
    answers_at_once = False
    turn_in_items = False
    tokenizer_published = True

    def by_type(self, data: JSON) -> bool:
        return False  # (chat is what is left: detection.py)

    def takes_plain(self, message: JSON) -> bool:
        return True

    def read(self, payload: JSON) -> Native:
        role = payload["role"]
        calls = tuple(c["id"] for c in payload.get("tool_calls") or ())
        legacy = payload.get("function_call")
        if legacy:  # the legacy call has no id: its function's name pairs it with its result
            calls += (LEGACY_CALL + legacy["name"],)
        if role == "tool":
            return Native(CHAT, role, calls, (payload["tool_call_id"],), False)
        if role == "function":
            return Native(CHAT, role, calls, (LEGACY_CALL + payload["name"],), False)
        return Native(CHAT, role, calls, (), False) if calls else plain_native(CHAT, role)

    def texts(self, payload: JSON) -> list[str]:
        texts: list[str] = []
        content = payload.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif content:
            texts.extend(p["text"] for p in content if p.get("text") is not None)
        if payload.get("refusal"):
            texts.append(payload["refusal"])
        if payload.get("name"):
            texts.append(payload["name"])
        for call in payload.get("tool_calls") or []:
            texts.extend(stored_call_parts(call))
        legacy = payload.get("function_call")
        if legacy:
            texts.extend((legacy["name"], legacy.get("arguments", "")))
        return texts

    def parts_cost(self, payload: JSON) -> tuple[int, bool]:
        return parts_cost(payload.get("content"))

    def to_chat(self, m: Message, done: Conversion) -> list[JSON]:
        return [m.to_openai()]

    def as_chat(self, m: Message, done: Conversion) -> list[JSON]:
        return modern(m, done)

    def convert(
        self, messages: Sequence[Message], source: Source, *, store: bool, exact: bool
    ) -> Conversion:
        return to_chat(messages, source, exact)

    def opening(self) -> JSON:
        return {"role": "assistant", "content": ""}

    def stream_deltas(self, event: JSON, n: int) -> list[JSON] | None:
        return chat_stream.chunk_deltas(event, n)

    def apply_delta(self, payload: JSON, delta: JSON, partial: dict[str, str]) -> None:
        chat_stream.apply(payload, delta)

    def answered_by(self, m: Message) -> set[str]:
        return {m.tool_call_id} if m.tool_call_id else set()

    def repaired(
        self, m: Message, answered: set[str], last: bool, notes: list[JSON]
    ) -> Message | None:
        return chat_stream.repaired(m, answered, last, notes)
