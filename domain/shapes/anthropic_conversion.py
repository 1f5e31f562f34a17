"""Anthropic messages to chat messages and to Responses items, and messages of any shape as
Anthropic's Messages API takes them (domain/conversions.py says what crosses)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from ctxstore.domain.conversion_losses import JSON, Conversion
from ctxstore.domain.conversion_parts import (
    chat_file_to_anthropic,
    chat_turn,
    document_to_chat,
    document_to_responses,
    flatten,
    image_to_responses,
    result_text,
)
from ctxstore.domain.shapes.names import ANTHROPIC

if TYPE_CHECKING:
    from ctxstore.domain.messages import Message
    from ctxstore.domain.shapes.base import Source

# What the Messages API takes of a message; the rest of a stored Anthropic message (a
# response's id, type, model, stop_reason, usage; a caller's own keys) is reported.
ANTHROPIC_REQUEST = ("role", "content")

_WHY = {
    "thinking": "a thinking block's signature is Anthropic's: no other provider can verify it",
    "redacted_thinking": "redacted thinking is encrypted by Anthropic for Anthropic alone",
    "reasoning": "a reasoning item is encrypted by OpenAI for OpenAI alone",
    "server_tool_use": "a server tool ran at Anthropic; its call has no other form",
    "document": "a document block has no equivalent in this shape",
}


# ---- from Anthropic ---------------------------------------------------------------------


def anthropic_to_chat(m: Message, done: Conversion) -> list[JSON]:
    """An Anthropic message as chat messages: its tool results as tool messages first, then
    its text, images and documents with its tool uses as one message."""
    message = cast(JSON, m.native)
    role = message["role"]
    content = message["content"]
    if isinstance(content, str):
        return [{"role": role, "content": content}]
    parts: list[JSON] = []
    calls: list[JSON] = []
    results: list[JSON] = []
    for block in content:
        kind = block["type"]
        if kind == "text":
            parts.append({"type": "text", "text": block["text"]})
        elif kind == "image" and isinstance(block.get("source"), dict):
            url = _image_url(block["source"])
            if url is None:
                done.omit(m, "image", "an image given by a file id has no chat form")
            else:
                parts.append({"type": "image_url", "image_url": {"url": url}})
        elif kind == "document" and document_to_chat(block) is not None:
            parts.append(cast(JSON, document_to_chat(block)))
        elif kind == "tool_use":
            arguments = json.dumps(block.get("input", {}), ensure_ascii=False)
            calls.append({"id": block["id"], "type": "function",
                          "function": {"name": block["name"], "arguments": arguments}})  # fmt: skip
        elif kind == "tool_result":
            results.append({"role": "tool", "tool_call_id": block["tool_use_id"],
                            "content": result_text(block.get("content", ""))})  # fmt: skip
        else:
            done.omit(m, kind, _WHY.get(kind, f"an Anthropic {kind} block has no chat form"))
    return chat_turn(role, flatten(parts) if parts else None, calls, results)


def anthropic_to_responses(m: Message, done: Conversion) -> list[JSON]:
    """An Anthropic message as Responses items: its tool results first (function_call_output,
    images and documents kept as output parts), then its text, images and documents as one
    message, then its tool uses as function_call items."""
    message = cast(JSON, m.native)
    role, content = message["role"], message["content"]
    if isinstance(content, str):
        return [{"role": role, "content": content}]
    results: list[JSON] = []
    parts: list[JSON] = []
    calls: list[JSON] = []
    text_type = "output_text" if role == "assistant" else "input_text"
    for block in content:
        kind = block["type"]
        if kind == "tool_result":
            results.append({"type": "function_call_output", "call_id": block["tool_use_id"],
                            "output": _responses_output(block.get("content", ""))})  # fmt: skip
        elif kind == "tool_use":
            calls.append({"type": "function_call", "call_id": block["id"], "name": block["name"],
                          "arguments": json.dumps(block.get("input", {}), ensure_ascii=False)})  # fmt: skip
        elif kind == "text":
            parts.append({"type": text_type, "text": block["text"]})
        elif kind in ("image", "document") and _responses_part(block) is not None:
            parts.append(cast(JSON, _responses_part(block)))
        else:
            done.omit(m, kind, _WHY.get(kind, f"an Anthropic {kind} block has no Responses form"))
    body = [{"role": role, "content": parts}] if parts else []
    return results + body + calls


def _responses_part(block: JSON) -> JSON | None:
    if block.get("type") == "image":
        return image_to_responses(block)
    if block.get("type") == "document":
        return document_to_responses(block)
    return None


def _responses_output(content: Any) -> Any:
    """A tool result's content as a function_call_output's output: its text, or its parts
    when it holds images or documents (as input_text, input_image, input_file)."""
    if isinstance(content, str) or not isinstance(content, list):
        return result_text(content)
    if all(isinstance(b, dict) and b.get("type") == "text" for b in content):
        return result_text(content)
    out: list[JSON] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            out.append({"type": "input_text", "text": block.get("text", "")})
        elif _responses_part(block) is not None:
            out.append(cast(JSON, _responses_part(block)))
    return out


def _image_url(source: JSON) -> str | None:
    if source.get("type") == "base64":
        return f"data:{source.get('media_type', 'image/png')};base64,{source.get('data', '')}"
    if source.get("type") == "url":
        return str(source.get("url"))
    return None


# ---- to Anthropic ---------------------------------------------------------------------------


def to_anthropic(messages: Sequence[Message], source: Source, exact: bool) -> Conversion:
    """{"system", "messages"}: system and developer messages joined as the system prompt,
    an Anthropic message as it came (role and content; `exact`: key for key), the others
    converted through chat, a converted turn's tool results joined in one user message."""
    done = Conversion(ANTHROPIC, {})
    system: list[str] = []
    turns: list[JSON] = []
    merged = False  # whether the last turn was converted (not an Anthropic message as is)
    for m in messages:
        given = m.native if m.native is not None else m.to_openai()
        if m.role in ("system", "developer"):
            system.append(m.text())
            done.check(m, given, m.text())
            continue
        native = m.format == ANTHROPIC
        if exact and native and m.native is not None:
            turns.append(dict(m.native))  # key for key as it came
            merged = False
            continue
        converted = _anthropic_turns(m, source, done)
        if not native:
            done.check(m, given, [blocks for _, blocks in converted])
        for role, blocks in converted:
            if turns and turns[-1]["role"] == role and merged and not native:
                # Converted turns of one role join (a turn's tool results in one message);
                # Anthropic messages stay as they came (the API joins such turns itself).
                turns[-1]["content"] = _blocks(turns[-1]["content"]) + blocks
            else:
                turns.append({"role": role, "content": blocks})
            merged = not native
    done.payload = {"system": "\n\n".join(system) if system else None, "messages": turns}
    return done


def _anthropic_turns(m: Message, source: Source, done: Conversion) -> list[tuple[str, Any]]:
    if m.format == ANTHROPIC and m.native is not None:
        native = m.native
        extra = [k for k in native if k not in ANTHROPIC_REQUEST]
        if extra:
            done.omit(
                m, f"message fields {extra}",
                "the Messages API takes a message's role and content: read the message "
                "exactly with to_anthropic(exact=True)",
            )  # fmt: skip
        return [(str(native["role"]), native["content"])]
    out: list[tuple[str, Any]] = []
    for c in source(m).as_chat(m, done):
        if c["role"] == "tool":
            out.append(("user", [{"type": "tool_result", "tool_use_id": c["tool_call_id"],
                                  "content": result_text(c["content"])}]))  # fmt: skip
            continue
        blocks: list[JSON] = []
        content = c.get("content")
        if isinstance(content, str) and content:
            blocks.append({"type": "text", "text": content})
        elif isinstance(content, list):
            for part in content:
                if part.get("type") == "text":
                    blocks.append({"type": "text", "text": part["text"]})
                elif part.get("type") == "image_url":
                    blocks.append(_anthropic_image(part["image_url"].get("url", "")))
                elif part.get("type") == "file" and chat_file_to_anthropic(part) is not None:
                    blocks.append(cast(JSON, chat_file_to_anthropic(part)))
        for call in c.get("tool_calls") or []:
            if call.get("type") == "custom":  # free-form input: a tool_use input is an object
                name, arguments = call["custom"]["name"], {"input": call["custom"]["input"]}
            else:
                name = call["function"]["name"]
                try:
                    arguments = json.loads(call["function"]["arguments"] or "{}")
                except json.JSONDecodeError:
                    arguments = {"input": call["function"]["arguments"]}
            blocks.append({"type": "tool_use", "id": call["id"], "name": name,
                           "input": arguments})  # fmt: skip
        if blocks:
            out.append((c["role"], blocks))
    return out


def _blocks(content: Any) -> list[JSON]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def _anthropic_image(url: str) -> JSON:
    if url.startswith("data:") and ";base64," in url:
        media, data = url[5:].split(";base64,", 1)
        return {"type": "image", "source": {"type": "base64", "media_type": media, "data": data}}
    return {"type": "image", "source": {"type": "url", "url": url}}
