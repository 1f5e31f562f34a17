"""The four native message shapes, as the SDKs send and return them.

- `openai-chat`: Chat Completions messages (domain/messages.py's Message fields).
- `openai-responses`: Responses API items (`message`, `function_call`, `reasoning`, ...).
- `anthropic`: Anthropic Messages (`system`, user/assistant with content blocks).
- `gemini`: Gemini `Content` (user/model with parts: domain/gemini.py).

A chat message is stored as its fields. A message of the other three is stored as
`{"id", "format", "role", "native": <the payload exactly as it came>, "metadata"}`: `role`
is derived (what the item is in a conversation: user, assistant, system, developer, or
tool for the result of a call) and the payload is never rewritten. What the transcript
rules, token counts and previews need is read from the payload by `Native` below.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ctxstore.domain import gemini
from ctxstore.domain.errors import InvalidMessageError
from ctxstore.domain.gemini import GEMINI

CHAT, RESPONSES, ANTHROPIC = "openai-chat", "openai-responses", "anthropic"
FORMATS = (CHAT, RESPONSES, ANTHROPIC, GEMINI)
NATIVE = (RESPONSES, ANTHROPIC, GEMINI)
# Shapes whose next user turn answers every call of a turn at once.
ANSWERED_AT_ONCE = (ANTHROPIC, GEMINI)

# Responses items that make a call answered by a later item, and the field naming it.
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
ANTHROPIC_BLOCKS = {
    "text", "image", "document", "tool_use", "tool_result", "thinking", "redacted_thinking",
    "server_tool_use", "web_search_tool_result", "web_fetch_tool_result",
    "code_execution_tool_result", "bash_code_execution_tool_result",
    "text_editor_code_execution_tool_result", "mcp_tool_use", "mcp_tool_result",
    "container_upload", "search_result", "tool_search_tool_result",
}  # fmt: skip
# Blocks only Anthropic's shape has (a list of only `text` blocks is a chat message too).
ANTHROPIC_ONLY = ANTHROPIC_BLOCKS - {"text", "image"}
ROLES = ("system", "developer", "user", "assistant")
RESULT_ROLES = ("tool", "function")  # chat messages answering a call (function: legacy)


@dataclass(frozen=True)
class Native:
    """What the store reads from a native payload."""

    format: str
    role: str  # user, assistant, system, developer; "tool" for the result of a call
    calls: tuple[str, ...]  # ids of the calls it makes, answered by later messages
    answers: tuple[str, ...]  # ids of the calls it answers
    reasoning: bool  # a reasoning item, or an assistant turn carrying thinking blocks


def detect(data: dict[str, Any]) -> str:
    """The shape of a message dict: native shapes by what only they have, chat otherwise
    (a plain {"role", "content"} reads the same in every shape)."""
    kind = data.get("type")
    if kind is None and gemini.looks_like(data):
        return GEMINI
    if kind == "message" and ("stop_reason" in data or "model" in data):
        return ANTHROPIC  # an Anthropic response's message
    if isinstance(kind, str) and kind in RESPONSES_TYPES:
        return RESPONSES
    content = data.get("content")
    if isinstance(content, list) and any(
        isinstance(b, dict) and (b.get("type") in ANTHROPIC_ONLY or "cache_control" in b)
        for b in content
    ):
        return ANTHROPIC
    if isinstance(content, list) and any(
        isinstance(b, dict) and isinstance(b.get("source"), dict) for b in content
    ):
        return ANTHROPIC  # an image or document given by its source
    if isinstance(kind, str) and kind != "message":
        raise InvalidMessageError(
            f"not a chat message, a Responses item or an Anthropic message: type {kind!r} "
            f"(Responses item types: {', '.join(sorted(RESPONSES_TYPES))})"
        )
    return CHAT


def detect_batch(messages: list[Any]) -> list[str | None]:
    """The shape of each message of one insert: a message that reads the same in every
    shape (a plain {"role", "content"}) takes the batch's one native shape, if it has one;
    None for what is not a dict (validation names it)."""
    shapes = [detect(m) if isinstance(m, dict) and "native" not in m else None for m in messages]
    natives = {s for s in shapes if s in NATIVE}
    if len(natives) != 1:
        return shapes
    (batch,) = natives
    return [
        batch if s == CHAT and _plain(m, batch) else s
        for s, m in zip(shapes, messages, strict=True)
    ]


def _plain(message: dict[str, Any], shape: str) -> bool:
    """Whether a chat-looking message is also a valid message of `shape` as it is."""
    if shape == GEMINI:
        return False  # a Content has parts, never content
    if shape == ANTHROPIC:
        return set(message) <= {"role", "content"} and message.get("role") in ("user", "assistant")
    return set(message) <= {"role", "content", "type"} and message.get("role") in ROLES


def read_native(payload: dict[str, Any], shape: str) -> Native:
    """The store's view of a native payload; raises InvalidMessageError naming what is
    missing or unknown."""
    if shape == RESPONSES:
        return _responses(payload)
    if shape == ANTHROPIC:
        return _anthropic(payload)
    if shape == GEMINI:
        role, calls, answers, _thought = gemini.read(payload)
        # (thoughts live inside their turn, as Anthropic's thinking blocks do)
        return Native(GEMINI, role, calls, answers, False)
    raise InvalidMessageError(f"format must be one of {', '.join(FORMATS)}, not {shape!r}")


def _responses(item: dict[str, Any]) -> Native:
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
        return Native(RESPONSES, role, (), (), False)
    if kind in RESPONSES_CALLS:
        call = item.get(RESPONSES_CALLS[kind])
        _check_id(call, f"Responses {kind} item's {RESPONSES_CALLS[kind]}")
        return Native(RESPONSES, "assistant", (str(call),), (), False)
    if kind in RESPONSES_OUTPUTS:
        call = item.get(RESPONSES_OUTPUTS[kind])
        _check_id(call, f"Responses {kind} item's {RESPONSES_OUTPUTS[kind]}")
        return Native(RESPONSES, "tool", (), (str(call),), False)
    return Native(RESPONSES, "assistant", (), (), kind == "reasoning")


def _anthropic(message: dict[str, Any]) -> Native:
    role = message.get("role")
    if role not in ("user", "assistant", "system"):
        raise InvalidMessageError(
            f"an Anthropic message's role is user, assistant or system, not {role!r}"
        )
    content = message.get("content")
    if isinstance(content, str):
        return Native(ANTHROPIC, role, (), (), False)
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
            _check_id(block.get("id"), f"Anthropic tool_use block {n}'s id")
            calls.append(str(block["id"]))
        elif kind == "tool_result":
            _check_id(block.get("tool_use_id"), f"Anthropic tool_result block {n}'s tool_use_id")
            answers.append(str(block["tool_use_id"]))
        elif kind in ("thinking", "redacted_thinking"):
            thinking = True
    if calls and role != "assistant":
        raise InvalidMessageError("only an assistant message makes tool_use calls")
    if answers and role != "user":
        raise InvalidMessageError("only a user message carries tool_result blocks")
    return Native(ANTHROPIC, "tool" if answers else role, tuple(calls), tuple(answers), thinking)


def _check_id(value: Any, what: str) -> None:
    if not isinstance(value, str) or not value:
        raise InvalidMessageError(f"{what} must be a non-empty string, got {value!r:.60}")


def texts_of(payload: dict[str, Any], shape: str) -> list[str]:
    """The texts of a native payload a model reads (for counting and previews)."""
    if shape == GEMINI:
        return gemini.texts(payload)
    found: list[str] = []
    _collect(payload, found, shape)
    return found


_TEXT_KEYS = {
    "text", "thinking", "arguments", "input", "output", "name", "refusal", "query", "code",
    "result", "content", "summary", "queries",
}  # fmt: skip
_SKIPPED_KEYS = {"id", "call_id", "tool_use_id", "type", "status", "signature", "data",
                 "encrypted_content", "role", "cache_control", "source", "image_url",
                 "file_data", "file_id", "approval_request_id"}  # fmt: skip


def _collect(value: Any, found: list[str], shape: str, key: str | None = None) -> None:
    if isinstance(value, str):
        if key is None or key in _TEXT_KEYS:
            found.append(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            if k in _SKIPPED_KEYS:
                continue
            if k == "input" and isinstance(v, dict):  # a tool_use block's input: its JSON
                found.append(json.dumps(v, ensure_ascii=False))
                continue
            _collect(v, found, shape, k if isinstance(v, str) else key)
    elif isinstance(value, list):
        for v in value:
            _collect(v, found, shape, key)
