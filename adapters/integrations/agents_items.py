"""How the Agents SDK's items are held in ctxstore messages: one item as a native Responses
message where the shape knows it, else (and in sessions made before native items) as a
chat message keeping the item in its metadata; a compaction's output items in one summary."""

from __future__ import annotations

import json
from typing import Any

from ctxstore.domain.compaction import summary_message as summary_of_text
from ctxstore.domain.context import JSON
from ctxstore.domain.errors import CtxStoreError
from ctxstore.domain.shapes import RESPONSES, read_native

MODEL_INPUTS = ("function_call_output", "computer_call_output", "custom_tool_call_output")
ROLES = ("user", "assistant", "system", "developer")
ITEM = "agents_item"  # metadata key of the one item a message holds
ITEMS = "agents_items"  # metadata key of a compaction's output items
CONTENT_IN_MESSAGE = "agents_item_content"  # the item's content is the message's, kept once


def item_text(item: Any) -> str:
    """What an item says, for token counting and for people reading the audit."""
    if not isinstance(item, dict):
        return json.dumps(item, ensure_ascii=False, default=str)
    content = item.get("content")
    if isinstance(content, str) and content:
        return content
    if isinstance(content, list):
        texts = [p.get("text") or p.get("refusal") for p in content if isinstance(p, dict)]
        joined = "\n".join(t for t in texts if isinstance(t, str))
        if joined:
            return joined
    if item.get("type") == "function_call":
        return f"{item.get('name')}({item.get('arguments', '')})"
    output = item.get("output")
    if isinstance(output, str) and output:
        return output
    return json.dumps(item, ensure_ascii=False, default=str)


def item_message(item: Any) -> JSON:
    """The ctxstore message that holds one SDK item. When the item's text content is the
    message's content, it is kept once: the item holds None in its place (key order kept)."""
    role = item.get("role") if isinstance(item, dict) else None
    if role not in ROLES:
        kind = item.get("type") if isinstance(item, dict) else None
        role = "user" if kind in MODEL_INPUTS else "assistant"
    text = item_text(item)
    if isinstance(item, dict) and isinstance(item.get("content"), str) and item["content"] == text:
        held = {**item, "content": None}
        return {"role": role, "content": text, "metadata": {ITEM: held, CONTENT_IN_MESSAGE: True}}
    return {"role": role, "content": text, "metadata": {ITEM: item}}


def summary_message(items: list[Any]) -> JSON:
    """One summary message holding a compaction's output items."""
    text = "\n\n".join(item_text(i) for i in items) or "(compacted)"
    return summary_of_text(text, metadata={ITEMS: items, "source": "agents-compaction"})


def native_message(item: Any) -> JSON | None:
    """The native Responses message holding `item` exactly, or None when the shape does not
    know it (it is then held the older way, item_message)."""
    if not isinstance(item, dict):
        return None
    try:
        seen = read_native(item, RESPONSES)
    except CtxStoreError:
        return None
    return {"role": seen.role, "format": RESPONSES, "native": item}


def held_items(metadata: dict[str, Any], content: Any = None, native: Any = None) -> list[Any]:
    """The items a message holds (given its metadata, content and native payload)."""
    if native is not None:
        return [native]
    if ITEMS in metadata:
        return list(metadata[ITEMS])
    if ITEM not in metadata:
        return []
    item = metadata[ITEM]
    if metadata.get(CONTENT_IN_MESSAGE) and isinstance(item, dict):
        return [{**item, "content": content}]
    return [item]
