"""A Responses reply as it streams: its stream events read into neutral deltas
(domain/streaming.py), the deltas applied to the item, and the item repaired for a prompt
when it did not finish (domain/stream_repair.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ctxstore.domain.errors import InvalidOperationError
from ctxstore.domain.shapes.deltas import JSON, kind_of

if TYPE_CHECKING:
    from ctxstore.domain.messages import Message

_TEXT_EVENTS = {
    "response.output_text.delta": ("text", "content_index"),
    "response.reasoning_summary_text.delta": ("reasoning", "summary_index"),
    "response.refusal.delta": ("refusal", None),
}


def event_deltas(event: JSON) -> list[JSON] | None:
    """A Responses stream event's deltas; None for another event."""
    kind = event.get("type")
    if not (isinstance(kind, str) and kind.startswith("response.")):
        return None
    delta = event.get("delta")
    if kind in _TEXT_EVENTS and isinstance(delta, str):
        key, index_key = _TEXT_EVENTS[kind]
        made: JSON = {key: delta}
        if index_key is not None and isinstance(event.get(index_key), int):
            made["index"] = event[index_key]
        return [made]
    if kind in ("response.function_call_arguments.delta", "response.custom_tool_call_input.delta"):
        return [{"call": {"arguments": str(delta)}}] if isinstance(delta, str) else []
    return []  # created, in_progress, part added/done, item added/done, ...: nothing to add


def apply(item: JSON, d: JSON) -> None:
    """Apply one neutral delta to a Responses item being streamed."""
    kind = item.get("type", "message")
    if kind == "message" and ("text" in d or "refusal" in d):
        content = item.setdefault("content", [])
        part_type, key = ("output_text", "text") if "text" in d else ("refusal", "refusal")
        index = d.get("index")
        if index is None:
            index = max((n for n, p in enumerate(content) if p.get("type") == part_type),
                        default=len(content))  # fmt: skip
        while len(content) <= index:
            content.append({"type": part_type, key: ""} | (
                {"annotations": []} if part_type == "output_text" else {}))  # fmt: skip
        content[index][key] = content[index].get(key, "") + d[key]
    elif kind == "reasoning" and "reasoning" in d:
        summary = item.setdefault("summary", [])
        index = d.get("index", max(len(summary) - 1, 0))
        while len(summary) <= index:
            summary.append({"type": "summary_text", "text": ""})
        summary[index]["text"] += d["reasoning"]
    elif kind in ("function_call", "custom_tool_call") and "call" in d:
        key = "arguments" if kind == "function_call" else "input"
        call = d["call"]
        for field in ("name",) + (("call_id",) if "id" in call else ()):
            value = call.get("id" if field == "call_id" else field)
            if value:
                item[field] = value
        item[key] = item.get(key, "") + call.get("arguments", "")
    else:
        raise InvalidOperationError(f"a Responses {kind} item cannot take a {kind_of(d)} delta")


def repaired(m: Message, answered: set[str], last: bool, notes: list[JSON]) -> Message | None:
    """A message item with its text (status "incomplete"), a call a later item answers;
    anything else unfinished is dropped (see stream_repair)."""
    item: JSON = dict(m.native or {})
    kind = item.get("type", "message")
    if kind == "message":
        content = [p for p in item.get("content") or [] if _has_text(p)]
        if not content:
            return None
        if last and "text" in content[-1]:
            content[-1] = {**content[-1], "text": str(content[-1]["text"]).rstrip()}
        item["content"] = content
        if "status" in item or item.get("role") == "assistant":
            item["status"] = "incomplete"
        return m.model_copy(update={"native": item})
    call = m.call_ids
    if call and call[0] in answered:
        return m
    if call:
        notes.append({"id": m.id, "what": f"{kind} {call[0]}", "why": "incomplete: not run"})
    return None  # a half-written call, reasoning without its turn, anything else unfinished


def _has_text(part: Any) -> bool:
    if not isinstance(part, dict):
        return False
    value = part.get("text", part.get("refusal"))
    return isinstance(value, str) and bool(value.strip())
