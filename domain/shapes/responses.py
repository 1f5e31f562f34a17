"""Responses API items (`openai-responses`): `message`, `function_call`, `reasoning`, ...

Pairing: an item making a call (its `call_id`, or the field RESPONSES_CALLS names) is
answered by a later item answering it (RESPONSES_OUTPUTS); further calls and reasoning
items of the same turn may come between. A reasoning item goes with the item after it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ctxstore.domain.conversion_losses import Conversion
from ctxstore.domain.errors import InvalidMessageError
from ctxstore.domain.shapes import responses_stream
from ctxstore.domain.shapes.base import JSON, Native, Shape, Source, plain_native
from ctxstore.domain.shapes.names import RESPONSES
from ctxstore.domain.shapes.payloads import check_id, content_cost, payload_texts
from ctxstore.domain.shapes.responses_conversion import responses_to_chat, to_responses

if TYPE_CHECKING:
    from ctxstore.domain.messages import Message

# Items that make a call answered by a later item, and the field naming it.
RESPONSES_CALLS = {
    "function_call": "call_id", "custom_tool_call": "call_id", "computer_call": "call_id",
    "local_shell_call": "call_id", "shell_call": "call_id", "apply_patch_call": "call_id",
    "mcp_approval_request": "id", "program": "call_id",
}  # fmt: skip
# The items that answer them, and the field naming the call they answer.
RESPONSES_OUTPUTS = {
    "function_call_output": "call_id", "custom_tool_call_output": "call_id",
    "computer_call_output": "call_id", "local_shell_call_output": "id",
    "shell_call_output": "call_id", "apply_patch_call_output": "call_id",
    "mcp_approval_response": "approval_request_id", "program_output": "call_id",
}  # fmt: skip
# Items the model or the platform produced on its own (hosted tools run server-side, so
# their calls carry their results), and input-only items.
RESPONSES_OTHER = {
    "message", "reasoning", "compaction", "compaction_trigger", "item_reference",
    "web_search_call", "file_search_call", "image_generation_call", "code_interpreter_call",
    "mcp_call", "mcp_list_tools", "tool_search_call", "tool_search_output",
    "additional_tools", "configuration_update",
}  # fmt: skip
RESPONSES_TYPES = set(RESPONSES_CALLS) | set(RESPONSES_OUTPUTS) | RESPONSES_OTHER
# Required fields of the items whose use the store depends on (pairing, text).
RESPONSES_REQUIRED = {
    "message": ("role", "content"), "function_call": ("call_id", "name", "arguments"),
    "function_call_output": ("call_id", "output"), "custom_tool_call": ("call_id", "name", "input"),
    "custom_tool_call_output": ("call_id", "output"), "reasoning": ("summary",),
    "item_reference": ("id",), "mcp_approval_request": ("id",),
    "mcp_approval_response": ("approval_request_id",), "local_shell_call_output": ("id",),
}  # fmt: skip
ROLES = ("system", "developer", "user", "assistant")


def read_item(item: JSON) -> Native:
    """What the store reads from a Responses item; raises InvalidMessageError."""
    kind = item.get("type", "message" if "role" in item else None)
    if kind not in RESPONSES_TYPES:
        raise InvalidMessageError(
            f"not a Responses item: type {kind!r} (known: {', '.join(sorted(RESPONSES_TYPES))})"
        )
    missing = [f for f in RESPONSES_REQUIRED.get(str(kind), ()) if f not in item]
    if missing:
        raise InvalidMessageError(f"Responses {kind} item lacks {', '.join(missing)}")
    if kind == "message":
        role = item["role"]
        if role not in ROLES:
            raise InvalidMessageError(f"Responses message role must be one of {ROLES}: {role!r}")
        return plain_native(RESPONSES, role)
    if kind in RESPONSES_CALLS:
        call = item.get(RESPONSES_CALLS[kind])
        check_id(call, f"Responses {kind} item's {RESPONSES_CALLS[kind]}")
        return Native(RESPONSES, "assistant", (str(call),), (), False)
    if kind in RESPONSES_OUTPUTS:
        call = item.get(RESPONSES_OUTPUTS[kind])
        check_id(call, f"Responses {kind} item's {RESPONSES_OUTPUTS[kind]}")
        return Native(RESPONSES, "tool", (), (str(call),), False)
    return Native(RESPONSES, "assistant", (), (), kind == "reasoning")


class ResponsesShape(Shape):
    """`openai-responses`: an item of the Responses API, kept as it came."""

    name = RESPONSES
    native = True
    answers_at_once = False
    turn_in_items = True
    tokenizer_published = True

    def by_type(self, data: JSON) -> bool:
        kind = data.get("type")
        return isinstance(kind, str) and kind in RESPONSES_TYPES

    def takes_plain(self, message: JSON) -> bool:
        return set(message) <= {"role", "content", "type"} and message.get("role") in ROLES

    def read(self, payload: JSON) -> Native:
        return read_item(payload)

    def texts(self, payload: JSON) -> list[str]:
        return payload_texts(payload)

    def parts_cost(self, payload: JSON) -> tuple[int, bool]:
        return content_cost(payload)

    def to_chat(self, m: Message, done: Conversion) -> list[JSON]:
        return responses_to_chat(m, done)

    def convert(
        self, messages: Sequence[Message], source: Source, *, store: bool, exact: bool
    ) -> Conversion:
        return to_responses(messages, source, store)

    def opening(self) -> JSON:
        return {"type": "message", "role": "assistant", "content": []}

    def stream_deltas(self, event: JSON, n: int) -> list[JSON] | None:
        return responses_stream.event_deltas(event)

    def apply_delta(self, payload: JSON, delta: JSON, partial: dict[str, str]) -> None:
        responses_stream.apply(payload, delta)

    def repaired(
        self, m: Message, answered: set[str], last: bool, notes: list[JSON]
    ) -> Message | None:
        return responses_stream.repaired(m, answered, last, notes)

    def drops_before(self, before: Message) -> bool:
        return before.format == RESPONSES and (before.native or {}).get("type") == "reasoning"
