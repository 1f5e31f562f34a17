"""Responses items to chat messages, and messages of any shape as Responses input items
(domain/conversions.py says what crosses)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from ctxstore.domain.conversion_losses import JSON, Conversion
from ctxstore.domain.conversion_parts import (
    chat_file_to_responses,
    flatten,
    responses_file_to_chat,
    result_text,
)
from ctxstore.domain.shapes.names import RESPONSES

if TYPE_CHECKING:
    from ctxstore.domain.messages import Message
    from ctxstore.domain.shapes.base import Source


# ---- from Responses ---------------------------------------------------------------------


def responses_to_chat(m: Message, done: Conversion) -> list[JSON]:
    """A Responses item as chat messages: consecutive function calls of one turn join one
    assistant message's tool_calls."""
    item = cast(JSON, m.native)
    kind = item.get("type", "message")
    if kind == "message":
        return [{"role": item["role"], "content": _chat_content(item["content"])}]
    if kind == "function_call":
        call = {"id": item["call_id"], "type": "function",
                "function": {"name": item["name"], "arguments": item["arguments"]}}  # fmt: skip
        return [_merge_call(done, call)]
    if kind == "custom_tool_call":
        call = {"id": item["call_id"], "type": "custom",
                "custom": {"name": item["name"], "input": item["input"]}}  # fmt: skip
        return [_merge_call(done, call)]
    if kind in ("function_call_output", "custom_tool_call_output"):
        return [{"role": "tool", "tool_call_id": item["call_id"],
                 "content": result_text(item["output"])}]  # fmt: skip
    done.omit(m, kind, f"a Responses {kind} item has no Chat Completions equivalent")
    return []


def _merge_call(done: Conversion, call: JSON) -> JSON:
    """Consecutive function calls of one turn become one assistant message's tool_calls."""
    last: JSON | None = done.payload[-1] if done.payload else None
    if last is not None and last.get("role") == "assistant" and last.get("tool_calls"):
        last["tool_calls"].append(call)
        done.payload.pop()
        return last
    return {"role": "assistant", "tool_calls": [call]}


def _chat_content(content: Any) -> Any:
    if isinstance(content, str):
        return content
    parts: list[JSON] = []
    for part in content:
        kind = part.get("type")
        if kind in ("input_text", "output_text", "text"):
            parts.append({"type": "text", "text": part["text"]})
        elif kind == "input_image" and part.get("image_url"):
            parts.append({"type": "image_url", "image_url": {"url": part["image_url"]}})
        elif kind == "input_file" and responses_file_to_chat(part) is not None:
            parts.append(cast(JSON, responses_file_to_chat(part)))
        elif kind == "refusal":
            parts.append({"type": "text", "text": part.get("refusal", "")})
    return flatten(parts)


# ---- to Responses -------------------------------------------------------------------------


def to_responses(messages: Sequence[Message], source: Source, store: bool) -> Conversion:
    """The messages as Responses input items: a Responses item as it came (`store=False`:
    without its id, a reasoning item without encrypted_content left out), a message of
    another shape read straight where its shape can, else through chat."""
    done = Conversion(RESPONSES, [])
    for m in messages:
        if m.format == RESPONSES and m.native is not None:
            done.payload.extend(_as_given(m, done, store))
            continue
        given = source(m)
        items = given.direct_responses(m, done)
        if items is None:
            items = _from_chat(given.as_chat(m, done))
        done.check(m, m.native if m.native is not None else m.to_openai(), items)
        done.payload.extend(items)
    return done


def _as_given(m: Message, done: Conversion, store: bool) -> list[JSON]:
    item = dict(cast(JSON, m.native))
    if not store:
        if item.get("type") == "reasoning" and not item.get("encrypted_content"):
            done.omit(m, "reasoning", "store=False: a reasoning item needs its "
                      "encrypted_content to be sent back without stored state")  # fmt: skip
            return []
        if item.get("type") != "item_reference":
            item.pop("id", None)
    return [item]


def _from_chat(chat: list[JSON]) -> list[JSON]:
    items: list[JSON] = []
    for c in chat:
        if c["role"] == "tool":
            items.append({"type": "function_call_output", "call_id": c["tool_call_id"],
                          "output": result_text(c["content"])})  # fmt: skip
            continue
        if c.get("content") is not None:
            items.append({"role": c["role"], "content": _responses_content(c)})
        for call in c.get("tool_calls") or []:
            if call.get("type") == "custom":
                items.append({"type": "custom_tool_call", "call_id": call["id"],
                              "name": call["custom"]["name"], "input": call["custom"]["input"]})  # fmt: skip
            else:
                items.append({"type": "function_call", "call_id": call["id"],
                              "name": call["function"]["name"],
                              "arguments": call["function"]["arguments"]})  # fmt: skip
    return items


def _responses_content(chat: JSON) -> Any:
    content = chat["content"]
    if isinstance(content, str):
        return content
    out_type = "output_text" if chat["role"] == "assistant" else "input_text"
    parts: list[JSON] = []
    for part in content:
        if part.get("type") == "text":
            parts.append({"type": out_type, "text": part["text"]})
        elif part.get("type") == "image_url":
            image = part["image_url"]
            parts.append({"type": "input_image", "image_url": image.get("url"),
                          "detail": image.get("detail", "auto")})  # fmt: skip
        elif part.get("type") == "file" and chat_file_to_responses(part) is not None:
            parts.append(cast(JSON, chat_file_to_responses(part)))
    return parts
