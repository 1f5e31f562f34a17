"""An Anthropic reply as it streams: its stream events read into neutral deltas
(domain/streaming.py), the deltas applied to the message (a tool's input kept as the JSON
text it streams in until the reply finishes), and the message repaired for a prompt when
it did not finish (domain/stream_repair.py)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ctxstore.domain.errors import InvalidMessageError, InvalidOperationError
from ctxstore.domain.shapes.deltas import JSON, kind_of

if TYPE_CHECKING:
    from ctxstore.domain.messages import Message

TOOL_BLOCKS = ("tool_use", "server_tool_use", "mcp_tool_use")
_EVENTS = {
    "message_start", "message_delta", "message_stop", "content_block_start",
    "content_block_delta", "content_block_stop", "ping",
}  # fmt: skip
_DELTAS = {
    "text_delta": ("text", "text"), "thinking_delta": ("reasoning", "thinking"),
    "signature_delta": ("signature", "signature"),
}  # fmt: skip


def event_deltas(event: JSON) -> list[JSON] | None:
    """An Anthropic stream event's deltas; None for another event."""
    kind = event.get("type")
    if kind not in _EVENTS:
        return None
    index = event.get("index")
    if kind == "content_block_start" and isinstance(event.get("content_block"), dict):
        return [{"block": event["content_block"], "index": index}]
    if kind != "content_block_delta" or not isinstance(event.get("delta"), dict):
        return []
    delta = event["delta"]
    kind = str(delta.get("type"))
    if kind in _DELTAS:
        key, field = _DELTAS[kind]
        return [{key: str(delta.get(field, "")), "index": index}]
    if kind == "input_json_delta":
        return [{"call": {"index": index, "arguments": str(delta.get("partial_json", ""))}}]
    if kind == "citations_delta" and isinstance(delta.get("citation"), dict):
        return [{"citation": delta["citation"], "index": index}]
    return []


def apply(native: JSON, d: JSON, partial: dict[str, str]) -> None:
    """Apply one neutral delta to an Anthropic message being streamed."""
    content = native.get("content")
    if isinstance(content, str):
        content = [{"type": "text", "text": content}] if content else []
        native["content"] = content
    if content is None:
        content = native["content"] = []
    index = d.get("index")
    if "block" in d:
        block = dict(d["block"])
        if block.get("type") == "tool_use" and block.get("input") in (None, {}):
            block["input"] = {}
        _place(content, index, block)
        return
    if "call" in d:
        index = d["call"].get("index", index)
    if index is None:  # text or thinking without an index: the last block of its kind
        want = {"text": "text", "reasoning": "thinking"}.get(kind_of(d))
        found = [n for n, b in enumerate(content) if b.get("type") == want]
        index = found[-1] if found else len(content)
    if index >= len(content):
        start = {"text": {"type": "text", "text": ""},
                 "reasoning": {"type": "thinking", "thinking": ""}}.get(kind_of(d))  # fmt: skip
        if start is None:
            raise InvalidOperationError(f"a {kind_of(d)} delta names block {index}, not started")
        _place(content, index, start)
    block = content[index]
    if "text" in d and block.get("type") == "text":
        block["text"] = block.get("text", "") + d["text"]
    elif "reasoning" in d and block.get("type") == "thinking":
        block["thinking"] = block.get("thinking", "") + d["reasoning"]
    elif "signature" in d and block.get("type") == "thinking":
        block["signature"] = block.get("signature", "") + d["signature"]
    elif "citation" in d and block.get("type") == "text":
        block["citations"] = [*(block.get("citations") or []), d["citation"]]
    elif "call" in d and block.get("type") in TOOL_BLOCKS:
        partial[str(index)] = partial.get(str(index), "") + d["call"].get("arguments", "")
    else:
        raise InvalidOperationError(
            f"Anthropic block {index} ({block.get('type')}) cannot take a {kind_of(d)} delta"
        )


def _place(content: list[JSON], index: int | None, block: JSON) -> None:
    at = len(content) if index is None else index
    if at > len(content):
        raise InvalidOperationError(f"block {at} starts before block {len(content)}")
    if at == len(content):
        content.append(block)
    else:
        content[at] = block


def finish(native: JSON, partial: dict[str, str]) -> JSON:
    """The message with the tool inputs that streamed as JSON text parsed into their blocks."""
    done: JSON = json.loads(json.dumps(native))
    for index, text in partial.items():
        try:
            value = json.loads(text) if text.strip() else {}
        except ValueError:
            raise InvalidMessageError(
                f"tool input of block {index} is not complete JSON ({text[-40:]!r})"
            ) from None
        done["content"][int(index)]["input"] = value
    return done


def hosted_answers(native: JSON) -> set[str]:
    """The calls a message answers itself (a hosted tool's result beside its call)."""
    content = native.get("content")
    if not isinstance(content, list):
        return set()
    return {str(b["tool_use_id"]) for b in content if isinstance(b, dict) and "tool_use_id" in b}


def makes_calls(native: JSON) -> bool:
    content = native.get("content")
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") in TOOL_BLOCKS for b in content
    )


def repaired(m: Message, answered: set[str], last: bool, notes: list[JSON]) -> Message | None:
    """Its text, signed thinking and the tool uses answered (here or later) kept; nothing
    but thinking left is nothing to send (see stream_repair)."""
    native: JSON = dict(m.native or {})
    answered = answered | hosted_answers(native)
    content = native.get("content")
    blocks: list[Any] = (
        [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
    )
    kept: list[JSON] = []
    for b in blocks:
        kind = b.get("type")
        if kind in TOOL_BLOCKS and b.get("id") not in answered:
            notes.append(
                {"id": m.id, "what": f"{kind} {b.get('id')}", "why": "incomplete: not run"}
            )
        elif kind == "thinking" and not b.get("signature"):
            notes.append({"id": m.id, "what": "thinking", "why": "incomplete: unsigned"})
        elif kind == "text" and not str(b.get("text", "")).strip():
            continue
        else:
            kept.append(b)
    if last:
        kept = _without_trailing_space(kept)
    if not any(b.get("type") not in ("thinking", "redacted_thinking") for b in kept):
        return None
    native["content"] = kept
    return m.model_copy(update={"native": native})


def _without_trailing_space(blocks: list[JSON]) -> list[JSON]:
    if blocks and blocks[-1].get("type") == "text":
        return [*blocks[:-1], {**blocks[-1], "text": str(blocks[-1]["text"]).rstrip()}]
    return blocks
