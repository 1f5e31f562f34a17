"""Gemini `Content` to and from the other shapes (conversions.py dispatches here).

From Gemini, a Content becomes chat messages (the other shapes are made from those): text
parts as content, inline images as `data:` URLs and inline files as `file` parts, function
calls as tool calls (their id, or one made from the message's id and the call's place),
function responses as tool messages answering them. A thought, a thought signature (only
Gemini can verify one), a Google file URI and code Gemini ran are left out and reported.

To Gemini, `{"system_instruction", "contents"}` as `generate_content` takes them (snake_case
field names, which the SDK and the REST API both read): system and developer messages join
`system_instruction`; user and assistant messages become user and model turns; tool calls
become `function_call` parts with their arguments parsed; a turn's tool results become the
`function_response` parts of one user turn, each naming its call's function. A Gemini
Content is sent as it came.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

from ctxstore.domain.blobs import is_ref, parse_ref
from ctxstore.domain.conversion_losses import JSON, Conversion
from ctxstore.domain.conversion_parts import chat_turn, data_url, split_data_url
from ctxstore.domain.gemini import GEMINI, field
from ctxstore.domain.plain import is_record

if TYPE_CHECKING:
    from ctxstore.domain.messages import Message

WHY = {
    "thought": "a thought is Gemini's own reasoning, for Gemini alone",
    "thought_signature": "a thought signature is Gemini's: no other provider can verify it",
    "file_data": "a file_data URI names a file in Google's file store or a URL only Gemini reads",
    "executable_code": "code Gemini ran has no form in this shape",
    "code_execution_result": "code Gemini ran has no form in this shape",
    "tool_call": "a server tool ran at Google; its call has no other form",
    "tool_response": "a server tool ran at Google; its result has no other form",
}
AUDIO = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/mp3": "mp3", "audio/mpeg": "mp3"}


# ---- from Gemini ------------------------------------------------------------------------------


def gemini_to_chat(m: Message, content: JSON, done: Conversion) -> list[JSON]:
    """A Content as chat messages: a model turn as one assistant message, a user turn as a
    user message, its function responses as tool messages first."""
    role = "assistant" if content.get("role") == "model" else "user"
    parts: list[JSON] = []
    calls: list[JSON] = []
    results: list[JSON] = []
    for n, part in enumerate(content.get("parts") or []):
        if field(part, "thought"):
            done.omit(m, f"parts[{n}]", WHY["thought"])
            continue
        if field(part, "thought_signature") is not None:
            done.omit(m, f"parts[{n}].thought_signature", WHY["thought_signature"])
        if isinstance(text := field(part, "text"), str):
            parts.append({"type": "text", "text": text})
        elif (call := field(part, "function_call")) is not None:
            call_id = call.get("id") or _made_id(m, n)
            done.legacy[_pending(call["name"], done)] = call_id
            arguments = json.dumps(call.get("args") or {}, ensure_ascii=False)
            calls.append({"id": call_id, "type": "function",
                          "function": {"name": call["name"], "arguments": arguments}})  # fmt: skip
        elif (response := field(part, "function_response")) is not None:
            call_id = response.get("id") or done.legacy.pop(_answered(response["name"], done), "")
            results.append({"role": "tool", "tool_call_id": call_id or _made_id(m, n),
                            "content": json.dumps(response.get("response") or {},
                                                  ensure_ascii=False)})  # fmt: skip
        elif (blob := field(part, "inline_data")) is not None and _chat_part(blob, role):
            parts.append(cast(JSON, _chat_part(blob, role)))
        else:
            kind = next((k for k in WHY if field(part, k) is not None), "inline_data")
            done.omit(m, f"parts[{n}].{kind}", WHY.get(kind, _NO_CHAT))
    return chat_turn(role, _flat(parts) if parts else None, calls, results)


_NO_CHAT = "inline data of this media type has no chat form"


def _made_id(m: Message, n: int) -> str:
    """A call id for a Gemini call without one: the message's id and the part's place."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", f"call_{m.id}_{n}")


def _pending(name: str, done: Conversion) -> str:
    k = sum(1 for key in done.legacy if key.startswith(f"gemini:{name}#"))
    return f"gemini:{name}#{k}"


def _answered(name: str, done: Conversion) -> str:
    found = [key for key in done.legacy if key.startswith(f"gemini:{name}#")]
    return found[0] if found else ""


def standard_base64(data: str) -> str:
    """Gemini's inline data (URL-safe base64 as the SDK writes bytes, or a reference to it)
    as the standard base64 a data: URL holds."""
    if is_ref(data):
        ref = parse_ref(data)
        return ref.__class__(ref.sha256, ref.media_type, ref.size, ref.width, ref.height,
                             "base64").uri()  # fmt: skip
    return data.replace("-", "+").replace("_", "/")


def _chat_part(blob: JSON, role: str) -> JSON | None:
    media = str(field(blob, "mime_type") or "")
    data = standard_base64(str(blob.get("data", "")))
    if media.startswith("image/"):
        return {"type": "image_url", "image_url": {"url": data_url(media, data)}}
    if role != "user":
        return None  # an assistant's chat content holds text only
    if media == "application/pdf" or media == "text/plain":
        file: JSON = {"file_data": data_url(media, data)}
        if field(blob, "display_name"):
            file["filename"] = field(blob, "display_name")
        return {"type": "file", "file": file}
    if media in AUDIO:
        return {"type": "input_audio", "input_audio": {"data": data, "format": AUDIO[media]}}
    return None


def _flat(parts: list[JSON]) -> Any:
    if len(parts) == 1 and parts[0]["type"] == "text":
        return parts[0]["text"]
    return parts


# ---- to Gemini ----------------------------------------------------------------------------------


def to_gemini(
    messages: Sequence[Message], as_chat: Callable[[Message, Conversion], list[JSON]],
    is_content: Callable[[Message], bool],
) -> Conversion:  # fmt: skip
    """The messages as `generate_content` takes them (see the module); `as_chat` gives a
    message of another shape as chat messages; `is_content` tells a Gemini Content."""
    done = Conversion(GEMINI, {})
    system: list[JSON] = []
    contents: list[JSON] = []
    names: dict[str, str] = {}  # call id -> its function's name
    as_came: set[int] = set()  # places of Gemini Contents sent as they came (never joined)
    for m in messages:
        if is_record(m):
            continue
        if m.role in ("system", "developer"):
            system.append({"text": m.text()})
            done.check(m, m.native if m.native is not None else m.to_openai(), m.text())
            continue
        if is_content(m) and m.native is not None:
            as_came.add(len(contents))
            contents.append(dict(m.native))
            continue
        made: list[JSON] = []
        for c in as_chat(m, done):
            turn = _gemini_turn(m, c, names, done)
            if turn is None:
                continue
            last = contents[-1] if contents else None
            if (
                last is not None and _results_only(last) and _results_only(turn)
                and len(contents) - 1 not in as_came
            ):  # fmt: skip
                last["parts"] += turn["parts"]  # a turn's results answer in one user turn
            else:
                contents.append(turn)
            made.append(turn)
        done.check(m, m.native if m.native is not None else m.to_openai(), made)
    done.payload = {
        "system_instruction": {"parts": system} if system else None,
        "contents": contents,
    }
    return done


def _results_only(turn: JSON) -> bool:
    return turn.get("role") == "user" and all("function_response" in p for p in turn["parts"])


def _gemini_turn(m: Message, c: JSON, names: dict[str, str], done: Conversion) -> JSON | None:
    if c["role"] == "tool":
        call_id = c["tool_call_id"]
        response = _response(c.get("content"))
        part = {"function_response": {"id": call_id, "name": names.get(call_id, "tool"),
                                      "response": response}}  # fmt: skip
        return {"role": "user", "parts": [part]}
    parts: list[JSON] = []
    content = c.get("content")
    if isinstance(content, str) and content:
        parts.append({"text": content})
    elif isinstance(content, list):
        for p in content:
            found = _gemini_part(p)
            if found is not None:
                parts.append(found)
    for call in c.get("tool_calls") or []:
        if call.get("type") == "custom":
            name, args = call["custom"]["name"], {"input": call["custom"]["input"]}
        else:
            name = call["function"]["name"]
            try:
                args = json.loads(call["function"]["arguments"] or "{}")
            except json.JSONDecodeError:
                args = {"input": call["function"]["arguments"]}
            if not isinstance(args, dict):
                args = {"input": args}
        names[call["id"]] = name
        parts.append({"function_call": {"id": call["id"], "name": name, "args": args}})
    if not parts:
        return None
    return {"role": "model" if c["role"] == "assistant" else "user", "parts": parts}


def _response(content: Any) -> JSON:
    """A tool result as a function_response's response: a JSON object as it is, anything
    else under `result` (the API takes an object)."""
    text = content if isinstance(content, str) else _joined(content)
    try:
        found = json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return {"result": text}
    return found if isinstance(found, dict) else {"result": found}


def _joined(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def _gemini_part(part: JSON) -> JSON | None:
    kind = part.get("type")
    if kind == "text":
        return {"text": part["text"]}
    if kind == "image_url":
        found = split_data_url(str((part.get("image_url") or {}).get("url", "")))
        if found is None:
            return None  # an image by URL: Gemini reads inline data or its own file URIs
        return {"inline_data": {"mime_type": found[0], "data": found[1]}}
    if kind == "file":
        file = part.get("file") or {}
        found = split_data_url(str(file.get("file_data", "")))
        if found is None:
            return None  # an OpenAI file id names nothing at Google
        blob: JSON = {"mime_type": found[0], "data": found[1]}
        if file.get("filename"):
            blob["display_name"] = file["filename"]
        return {"inline_data": blob}
    if kind == "input_audio":
        audio = part.get("input_audio") or {}
        return {"inline_data": {"mime_type": f"audio/{audio.get('format', 'wav')}",
                                "data": audio.get("data", "")}}  # fmt: skip
    return None
