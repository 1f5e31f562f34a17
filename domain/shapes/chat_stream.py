"""A chat reply as it streams: Chat Completions chunks read into neutral deltas
(domain/streaming.py), the deltas applied to the message, and the message repaired for a
prompt when it did not finish (domain/stream_repair.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ctxstore.domain.errors import InvalidOperationError
from ctxstore.domain.shapes.deltas import JSON, check_call, kind_of

if TYPE_CHECKING:
    from ctxstore.domain.messages import Message


def chunk_deltas(event: JSON, n: int) -> list[JSON] | None:
    """A Chat Completions chunk's deltas (its first choice's); None for another event."""
    if "choices" not in event:
        return None
    choices = event["choices"]
    if not isinstance(choices, list):
        raise InvalidOperationError(f"delta {n}: a chunk's choices must be a list")
    return chat_delta(choices[0].get("delta") or {}, n) if choices else []


def chat_delta(delta: JSON, n: int) -> list[JSON]:
    """A chunk's `delta` (or one given bare) as neutral deltas."""
    found: list[JSON] = []
    if isinstance(delta.get("reasoning_content"), str):
        found.append({"reasoning": delta["reasoning_content"]})
    if isinstance(delta.get("content"), str):
        found.append({"text": delta["content"]})
    if isinstance(delta.get("refusal"), str):
        found.append({"refusal": delta["refusal"]})
    for call in delta.get("tool_calls") or []:
        function = call.get("function") or {}
        made = {"index": call.get("index", 0)}
        for key, value in (("id", call.get("id")), ("name", function.get("name")),
                           ("arguments", function.get("arguments"))):  # fmt: skip
            if value is not None:
                made[key] = value
        check_call(made, n)
        found.append({"call": made})
    return found


def apply(msg: JSON, d: JSON) -> None:
    """Apply one neutral delta to a chat message being streamed."""
    if "text" in d:
        content = msg.get("content")
        if isinstance(content, list):
            parts = [p for p in content if p.get("type") == "text"]
            if parts:
                parts[-1]["text"] += d["text"]
            else:
                content.append({"type": "text", "text": d["text"]})
        else:
            msg["content"] = (content or "") + d["text"]
    elif "reasoning" in d:
        msg["reasoning_content"] = (msg.get("reasoning_content") or "") + d["reasoning"]
    elif "refusal" in d:
        msg["refusal"] = (msg.get("refusal") or "") + d["refusal"]
    elif "call" in d:
        call = d["call"]
        calls = msg.setdefault("tool_calls", []) or []
        msg["tool_calls"] = calls
        index = call.get("index", 0)
        if index > len(calls):
            raise InvalidOperationError(f"tool call {index} streamed before call {len(calls)}")
        if index == len(calls):
            if not call.get("id") or not call.get("name"):
                raise InvalidOperationError(f"tool call {index} starts without its id and name")
            calls.append({"id": call["id"], "type": "function",
                          "function": {"name": call["name"], "arguments": ""}})  # fmt: skip
        calls[index]["function"]["arguments"] += call.get("arguments", "")
    else:
        raise InvalidOperationError(f"a chat message cannot take a {kind_of(d)} delta")


def repaired(m: Message, answered: set[str], last: bool, notes: list[JSON]) -> Message | None:
    """The text that arrived and the calls a later message answers (see stream_repair)."""
    calls = [c for c in m.tool_calls or [] if c.id in answered]
    for c in m.tool_calls or []:
        if c.id not in answered:
            notes.append({"id": m.id, "what": f"tool call {c.id}", "why": "incomplete: not run"})
    text = m.content if isinstance(m.content, str) else m.text()
    if not (text or "").strip() and not calls and not m.refusal:
        return None
    trailing = last and isinstance(m.content, str) and m.content != m.content.rstrip()
    if len(calls) == len(m.tool_calls or []) and not trailing:
        return m
    data = m.stored()
    if trailing:
        data["content"] = str(m.content).rstrip()
    if calls:
        data["tool_calls"] = [c.model_dump(mode="json") for c in calls]
    else:
        data.pop("tool_calls", None)
        if data.get("content") is None:
            data["content"] = ""
    return type(m).model_validate(data)
