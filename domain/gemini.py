"""Gemini `Content` as a native shape: what the store reads from one (domain/shapes/).

A Content is `{"role": "user" | "model", "parts": [...]}`; each part holds one of `text`,
`inline_data`, `file_data`, `function_call`, `function_response`, `executable_code`,
`code_execution_result` (or a server tool's `tool_call` / `tool_response`), and may carry
`thought`, `thought_signature` and the like beside it. Keys come in the SDK's snake_case
or the REST API's camelCase; both are read, and the payload is kept as it came.

Pairing: a model turn's function calls are answered, all of them, by the function
responses of the very next user turn (as the API requires). Calls are paired by their
function's name and their order among the calls of that name in the turn (`name#0`,
`name#1`): Gemini's ids are optional, and a response may omit one its call had.
"""

from __future__ import annotations

import json
from typing import Any

from ctxstore.domain.errors import InvalidMessageError

GEMINI = "gemini"
ROLES = {"user": "user", "model": "assistant"}
PART_DATA = (
    "text", "inline_data", "file_data", "function_call", "function_response",
    "executable_code", "code_execution_result", "tool_call", "tool_response",
)  # fmt: skip
PART_BESIDE = (
    "thought", "thought_signature", "video_metadata", "media_resolution", "part_metadata",
    "speech_metadata", "audio_transcription", "media_processing",
)  # fmt: skip


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w.title() for w in rest)


def field(node: dict[str, Any], name: str) -> Any:
    """A field by its snake_case name, written either way."""
    found = node.get(name)
    return node.get(camel(name)) if found is None else found


def looks_like(data: dict[str, Any]) -> bool:
    """Whether a dict is a Gemini Content (its `parts`; a role, when given, user or model)."""
    return isinstance(data.get("parts"), list) and data.get("role") in (None, "user", "model")


def parts_of(content: dict[str, Any]) -> list[dict[str, Any]]:
    parts = content.get("parts")
    if not isinstance(parts, list):  # (empty while a reply streams: repair drops it so)
        raise InvalidMessageError("a Gemini Content needs parts: a list")
    for n, part in enumerate(parts):
        if not isinstance(part, dict):
            raise InvalidMessageError(f"Gemini part {n} must be an object, got {part!r:.60}")
        if not any(field(part, k) is not None for k in PART_DATA + PART_BESIDE):
            keys = ", ".join(repr(k) for k in list(part)[:8]) or "none"
            raise InvalidMessageError(
                f"Gemini part {n} holds none of {', '.join(PART_DATA)}; keys seen: {keys}"
            )
    return parts


def read(content: dict[str, Any]) -> tuple[str, tuple[str, ...], tuple[str, ...], bool]:
    """(role, calls made, calls answered, whether it holds thoughts) of a Content."""
    role = content.get("role", "user")
    if role not in ROLES:
        raise InvalidMessageError(f"a Gemini Content's role is user or model, not {role!r}")
    calls: list[str] = []
    answers: list[str] = []
    thought = False
    for n, part in enumerate(parts_of(content)):
        call, response = field(part, "function_call"), field(part, "function_response")
        if call is not None:
            calls.append(_numbered(_name(call, n, "function_call"), calls))
        if response is not None:
            answers.append(_numbered(_name(response, n, "function_response"), answers))
        thought = thought or bool(field(part, "thought"))
    if calls and role != "model":
        raise InvalidMessageError("only a model turn makes function calls")
    if answers and role != "user":
        raise InvalidMessageError("only a user turn carries function responses")
    return ("tool" if answers else ROLES[role]), tuple(calls), tuple(answers), thought


def _name(call: Any, n: int, what: str) -> str:
    name = call.get("name") if isinstance(call, dict) else None
    if not isinstance(name, str) or not name:
        raise InvalidMessageError(f"Gemini part {n}'s {what} needs a name, got {name!r:.60}")
    return name


def _numbered(name: str, earlier: list[str]) -> str:
    """`name#k`: the k-th call (or response) of that function in the turn."""
    k = sum(1 for e in earlier if e.rsplit("#", 1)[0] == name)
    return f"{name}#{k}"


def texts(content: dict[str, Any]) -> list[str]:
    """The texts a model reads in a Content: its text parts, a call's name and arguments,
    a response's name and result, code and its output."""
    found: list[str] = []
    for part in content.get("parts") or []:
        if not isinstance(part, dict):
            continue
        if isinstance(text := field(part, "text"), str):
            found.append(text)
        for key, inner in (("function_call", "args"), ("function_response", "response")):
            value = field(part, key)
            if isinstance(value, dict):
                found.append(str(value.get("name", "")))
                found.append(json.dumps(value.get(inner) or {}, ensure_ascii=False))
        code = field(part, "executable_code")
        if isinstance(code, dict):
            found.append(str(code.get("code", "")))
        result = field(part, "code_execution_result")
        if isinstance(result, dict):
            found.append(str(result.get("output", "")))
    return found
