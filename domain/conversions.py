"""Reading a context back in any of the four shapes (domain/shapes.py).

A message read in its own shape is its payload exactly as it came. Across shapes the
conversion is field by field (docs/reference/messages.md lists it); what cannot cross — reasoning
items and thinking blocks (another provider cannot verify their encryption or signature),
hosted-tool items, a provider's own fields — is left out and reported in `omitted`, never
mangled. A reply that did not finish streaming is sent repaired (domain/stream_repair.py),
what was dropped reported the same way.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from ctxstore.domain.conversion_gemini import gemini_to_chat, to_gemini
from ctxstore.domain.conversion_losses import JSON, Conversion
from ctxstore.domain.conversion_parts import (
    chat_file_to_anthropic,
    chat_file_to_responses,
    document_to_chat,
    document_to_responses,
    image_to_responses,
    responses_file_to_chat,
)
from ctxstore.domain.gemini import GEMINI
from ctxstore.domain.plain import is_record
from ctxstore.domain.shapes import ANTHROPIC, CHAT, RESPONSES
from ctxstore.domain.stream_repair import repair

if TYPE_CHECKING:
    from ctxstore.domain.messages import Message


def convert(
    messages: Sequence[Message], shape: str, *, store: bool = True, exact: bool = False
) -> Conversion:
    """The messages in `shape`: openai-chat (a list of messages), openai-responses (a list
    of input items; with `store=False` the items' ids are dropped and reasoning items
    without encrypted_content left out, as a request that stores nothing needs),
    anthropic ({"system", "messages"}) or gemini ({"system_instruction", "contents"}). Chat messages read back in the form Chat
    Completions takes, Anthropic messages as the Messages API takes them (role and content:
    the rest is reported); with `exact`, key for key as they were given (a provider's extras
    such as `reasoning_content`, `annotations` or a response's `usage`, which APIs refuse)."""
    messages, repaired = repair([m for m in messages if not is_record(m)])  # records: never sent
    done = _convert(messages, shape, store, exact)
    done.omitted[:0] = repaired
    return done


def _convert(messages: list[Message], shape: str, store: bool, exact: bool) -> Conversion:
    if shape == CHAT:
        done = Conversion(CHAT, [])
        for m in messages:
            if exact and m.native is None:
                done.payload.append(m.as_given())
                continue
            converted = _to_chat(m, done)
            if m.native is not None:
                done.check(m, m.native, converted)
            done.payload.extend(converted)
        return done
    if shape == RESPONSES:
        done = Conversion(RESPONSES, [])
        for m in messages:
            items = _to_responses(m, done, store)
            if m.format != RESPONSES:
                done.check(m, m.native if m.native is not None else m.to_openai(), items)
            done.payload.extend(items)
        return done
    if shape == ANTHROPIC:
        return _to_anthropic(messages, exact)
    if shape == GEMINI:
        return to_gemini(messages, _as_chat)
    raise ValueError(f"unknown shape {shape!r}")


def _as_chat(m: Message, done: Conversion) -> list[JSON]:
    return _to_chat(m, done) if m.native is not None else _modern(m, done)


# ---- to Chat Completions ----------------------------------------------------------------


def _to_chat(m: Message, done: Conversion) -> list[JSON]:
    if m.native is None:
        return [m.to_openai()]
    native = _native(m)
    if m.format == RESPONSES:
        return _responses_to_chat(m, native, done)
    if m.format == GEMINI:
        return gemini_to_chat(m, native, done)
    return _anthropic_to_chat(m, native, done)


def _responses_to_chat(m: Message, item: JSON, done: Conversion) -> list[JSON]:
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
        return [{"role": "tool", "tool_call_id": item["call_id"], "content": _text(item["output"])}]
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


def _anthropic_to_chat(m: Message, message: JSON, done: Conversion) -> list[JSON]:
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
                            "content": _text(block.get("content", ""))})  # fmt: skip
        else:
            done.omit(m, kind, _WHY.get(kind, f"an Anthropic {kind} block has no chat form"))
    out: list[JSON] = list(results)
    if parts or calls:
        one: JSON = {"role": role, "content": _flatten(parts) if parts else None}
        if calls:
            one["tool_calls"] = calls
        out.append(one)
    return out


# ---- to Responses -------------------------------------------------------------------------


def _to_responses(m: Message, done: Conversion, store: bool) -> list[JSON]:
    if m.format == RESPONSES and m.native is not None:
        item = dict(_native(m))
        if not store:
            if item.get("type") == "reasoning" and not item.get("encrypted_content"):
                done.omit(m, "reasoning", "store=False: a reasoning item needs its "
                          "encrypted_content to be sent back without stored state")  # fmt: skip
                return []
            if item.get("type") != "item_reference":
                item.pop("id", None)
        return [item]
    if m.native is not None and m.format == ANTHROPIC:
        return _anthropic_to_responses(m, _native(m), done)
    chat = _as_chat(m, done)  # (a Gemini Content's or a chat message's)
    items: list[JSON] = []
    for c in chat:
        if c["role"] == "tool":
            items.append({"type": "function_call_output", "call_id": c["tool_call_id"],
                          "output": _text(c["content"])})  # fmt: skip
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


def _anthropic_to_responses(m: Message, message: JSON, done: Conversion) -> list[JSON]:
    """An Anthropic message as Responses items: its tool results first (function_call_output,
    images and documents kept as output parts), then its text, images and documents as one
    message, then its tool uses as function_call items."""
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
        return _text(content)
    if all(isinstance(b, dict) and b.get("type") == "text" for b in content):
        return _text(content)
    out: list[JSON] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            out.append({"type": "input_text", "text": block.get("text", "")})
        elif _responses_part(block) is not None:
            out.append(cast(JSON, _responses_part(block)))
    return out


# ---- to Anthropic ---------------------------------------------------------------------------


# What the Messages API takes of a message; the rest of a stored Anthropic message (a
# response's id, type, model, stop_reason, usage; a caller's own keys) is reported.
ANTHROPIC_REQUEST = ("role", "content")


def _to_anthropic(messages: Sequence[Message], exact: bool = False) -> Conversion:
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
            turns.append(dict(_native(m)))  # key for key as it came
            merged = False
            continue
        converted = _anthropic_turns(m, done)
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


def _anthropic_turns(m: Message, done: Conversion) -> list[tuple[str, Any]]:
    if m.format == ANTHROPIC and m.native is not None:
        native = _native(m)
        extra = [k for k in native if k not in ANTHROPIC_REQUEST]
        if extra:
            done.omit(
                m, f"message fields {extra}",
                "the Messages API takes a message's role and content: read the message "
                "exactly with to_anthropic(exact=True)",
            )  # fmt: skip
        return [(native["role"], native["content"])]
    chat = _as_chat(m, done)
    out: list[tuple[str, Any]] = []
    for c in chat:
        if c["role"] == "tool":
            out.append(("user", [{"type": "tool_result", "tool_use_id": c["tool_call_id"],
                                  "content": _text(c["content"])}]))  # fmt: skip
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


# ---- shared --------------------------------------------------------------------------------


def _modern(m: Message, done: Conversion) -> list[JSON]:
    """A chat message as the other shapes' converters read it: a legacy `function_call` as
    a tool call, and the `function` message answering it as a tool result, paired by an id
    made from the calling message's id (the legacy form has none)."""
    chat = m.to_openai()
    legacy = chat.pop("function_call", None)
    if legacy is not None:
        call_id = "call_" + re.sub(r"[^A-Za-z0-9_-]", "_", m.id or legacy["name"])
        done.legacy[legacy["name"]] = call_id
        call = {"id": call_id, "type": "function", "function": legacy}
        chat["tool_calls"] = [*chat.get("tool_calls", []), call]
    if chat["role"] == "function":
        name = chat.pop("name")
        call_id = done.legacy.pop(name, "call_" + re.sub(r"[^A-Za-z0-9_-]", "_", name))
        chat = {"role": "tool", "tool_call_id": call_id, "content": chat.get("content") or ""}
    return [chat]


def _native(m: Message) -> JSON:
    return cast(JSON, m.native)


_WHY = {
    "thinking": "a thinking block's signature is Anthropic's: no other provider can verify it",
    "redacted_thinking": "redacted thinking is encrypted by Anthropic for Anthropic alone",
    "reasoning": "a reasoning item is encrypted by OpenAI for OpenAI alone",
    "server_tool_use": "a server tool ran at Anthropic; its call has no other form",
    "document": "a document block has no equivalent in this shape",
}


def _text(value: Any) -> str:
    """A result's text: a string, or the text of its parts."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(
            str(p.get("text", "")) for p in value if isinstance(p, dict) and "text" in p
        )
    return json.dumps(value, ensure_ascii=False)


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
    return _flatten(parts)


def _flatten(parts: list[JSON]) -> Any:
    """A content of text parts only is sent as one string (as every chat API takes it)."""
    if all(p["type"] == "text" for p in parts):
        return "".join(p["text"] for p in parts) if len(parts) == 1 else parts
    return parts


def _blocks(content: Any) -> list[JSON]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def _image_url(source: JSON) -> str | None:
    if source.get("type") == "base64":
        return f"data:{source.get('media_type', 'image/png')};base64,{source.get('data', '')}"
    if source.get("type") == "url":
        return str(source.get("url"))
    return None


def _anthropic_image(url: str) -> JSON:
    if url.startswith("data:") and ";base64," in url:
        media, data = url[5:].split(";base64,", 1)
        return {"type": "image", "source": {"type": "base64", "media_type": media, "data": data}}
    return {"type": "image", "source": {"type": "url", "url": url}}


class ShapedMessages:
    """Reads of a list of messages in each shape (mixed into visible contexts and prompts)."""

    messages: list[Message]

    def conversion(self, shape: str, *, store: bool = True, exact: bool = False) -> Conversion:
        """The messages in `shape`, with what could not be carried over (`omitted`)."""
        return convert(self.messages, shape, store=store, exact=exact)

    def to_openai(self, *, exact: bool = False) -> list[JSON]:
        """The messages as Chat Completions takes them (`exact`: chat messages key for key
        as they were given, see `convert`)."""
        payload: list[JSON] = convert(self.messages, CHAT, exact=exact).payload
        return payload

    def to_responses(self, *, store: bool = True) -> list[JSON]:
        """The messages as Responses API input items (`store=False`: see `convert`)."""
        payload: list[JSON] = convert(self.messages, RESPONSES, store=store).payload
        return payload

    def to_gemini(self) -> JSON:
        """{"system_instruction": ..., "contents": [...]} as Gemini's generate_content takes
        them (each stored Gemini Content as it came)."""
        payload: JSON = convert(self.messages, GEMINI).payload
        return payload

    def to_anthropic(self, *, exact: bool = False) -> JSON:
        """{"system": ..., "messages": [...]} as Anthropic's Messages API takes them
        (`exact`: each stored Anthropic message key for key as it came, a response's id,
        model, stop_reason and usage included, which the API refuses in a request)."""
        payload: JSON = convert(self.messages, ANTHROPIC, exact=exact).payload
        return payload
