"""Anthropic Messages (`anthropic`): `system`, user and assistant messages with content blocks.

Pairing: an assistant's `tool_use` blocks are answered, all of them, by the `tool_result`
blocks of the very next user message. A hosted tool's result (`server_tool_use` answered by
a `*_tool_result` block) sits in the message making the call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ctxstore.domain.conversion_losses import Conversion
from ctxstore.domain.errors import InvalidMessageError
from ctxstore.domain.plain import as_plain
from ctxstore.domain.shapes import anthropic_stream
from ctxstore.domain.shapes.anthropic_conversion import (
    anthropic_to_chat,
    anthropic_to_responses,
    to_anthropic,
)
from ctxstore.domain.shapes.base import JSON, Native, Shape, Source, plain_native
from ctxstore.domain.shapes.names import ANTHROPIC
from ctxstore.domain.shapes.payloads import check_id, content_cost, payload_texts

if TYPE_CHECKING:
    from ctxstore.domain.messages import Message

ANTHROPIC_BLOCKS = {
    "text", "image", "document", "tool_use", "tool_result", "thinking", "redacted_thinking",
    "server_tool_use", "web_search_tool_result", "web_fetch_tool_result",
    "code_execution_tool_result", "bash_code_execution_tool_result",
    "text_editor_code_execution_tool_result", "mcp_tool_use", "mcp_tool_result",
    "container_upload", "search_result", "tool_search_tool_result",
}  # fmt: skip
# Blocks only Anthropic's shape has (a list of only `text` blocks is a chat message too).
ANTHROPIC_ONLY = ANTHROPIC_BLOCKS - {"text", "image"}


def read_message(message: JSON) -> Native:
    """What the store reads from an Anthropic message; raises InvalidMessageError."""
    role = message.get("role")
    if role not in ("user", "assistant", "system"):
        raise InvalidMessageError(
            f"an Anthropic message's role is user, assistant or system, not {role!r}"
        )
    content = message.get("content")
    if isinstance(content, str):
        return plain_native(ANTHROPIC, role)
    if not isinstance(content, list) or not content:
        raise InvalidMessageError("an Anthropic message needs content: a string or blocks")
    calls: list[str] = []
    answers: list[str] = []
    thinking = False
    for n, block in enumerate(content):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind not in ANTHROPIC_BLOCKS:
            raise InvalidMessageError(
                f"Anthropic content block {n}: type {kind!r} is not one of "
                f"{', '.join(sorted(ANTHROPIC_BLOCKS))}"
            )
        if kind == "tool_use":
            check_id(block.get("id"), f"Anthropic tool_use block {n}'s id")
            calls.append(str(block["id"]))
        elif kind == "tool_result":
            check_id(block.get("tool_use_id"), f"Anthropic tool_result block {n}'s tool_use_id")
            answers.append(str(block["tool_use_id"]))
        elif kind in ("thinking", "redacted_thinking"):
            thinking = True
    if calls and role != "assistant":
        raise InvalidMessageError("only an assistant message makes tool_use calls")
    if answers and role != "user":
        raise InvalidMessageError("only a user message carries tool_result blocks")
    return Native(ANTHROPIC, "tool" if answers else role, tuple(calls), tuple(answers), thinking)


class AnthropicShape(Shape):
    """`anthropic`: a message of Anthropic's Messages API, kept as it came."""

    name = ANTHROPIC
    native = True
    answers_at_once = True
    turn_in_items = False
    tokenizer_published = False

    def by_type(self, data: JSON) -> bool:
        # An Anthropic response's message (the SDK's Message, as its JSON).
        return data.get("type") == "message" and ("stop_reason" in data or "model" in data)

    def by_content(self, data: JSON) -> bool:
        content = data.get("content")
        if not isinstance(content, list):
            return False
        # Blocks may be the SDK's objects (a reply's content in a dict): read as their JSON.
        blocks = [as_plain(b) for b in content]
        return any(
            isinstance(b, dict) and (b.get("type") in ANTHROPIC_ONLY or "cache_control" in b)
            for b in blocks
        ) or any(  # an image or document given by its source
            isinstance(b, dict) and isinstance(b.get("source"), dict) for b in blocks
        )

    def takes_plain(self, message: JSON) -> bool:
        return set(message) <= {"role", "content"} and message.get("role") in ("user", "assistant")

    def read(self, payload: JSON) -> Native:
        return read_message(payload)

    def texts(self, payload: JSON) -> list[str]:
        return payload_texts(payload)

    def parts_cost(self, payload: JSON) -> tuple[int, bool]:
        return content_cost(payload)

    def to_chat(self, m: Message, done: Conversion) -> list[JSON]:
        return anthropic_to_chat(m, done)

    def direct_responses(self, m: Message, done: Conversion) -> list[JSON] | None:
        # Straight, not through chat: a tool result's images and documents stay its output.
        return anthropic_to_responses(m, done)

    def convert(
        self, messages: Sequence[Message], source: Source, *, store: bool, exact: bool
    ) -> Conversion:
        return to_anthropic(messages, source, exact)

    def opening(self) -> JSON:
        return {"role": "assistant", "content": ""}

    def stream_deltas(self, event: JSON, n: int) -> list[JSON] | None:
        return anthropic_stream.event_deltas(event)

    def apply_delta(self, payload: JSON, delta: JSON, partial: dict[str, str]) -> None:
        anthropic_stream.apply(payload, delta, partial)

    def finished(self, payload: JSON, partial: dict[str, str]) -> JSON:
        return anthropic_stream.finish(payload, partial)

    def makes_calls(self, m: Message) -> bool:
        # Hosted tools' calls too (a server tool's result may not have arrived).
        return anthropic_stream.makes_calls(m.native or {})

    def answered_by(self, m: Message) -> set[str]:
        answers = set(m.shape.answers if m.shape else ())
        return answers | anthropic_stream.hosted_answers(m.native or {})

    def repaired(
        self, m: Message, answered: set[str], last: bool, notes: list[JSON]
    ) -> Message | None:
        return anthropic_stream.repaired(m, answered, last, notes)
