"""Streamed replies: the deltas a reply arrives in, applied to a message in its own shape.

A message being streamed carries a marker in its metadata (`ctxstore_incomplete`:
{"state": "streaming" | "abandoned", "reason"?, "partial"?}) until it is finished; the
marker goes when it is. Deltas are stored in a neutral form, one JSON object each:

- {"text": str, "index"?: int}        text of the reply (a content part or block)
- {"reasoning": str, "index"?: int}   reasoning: chat's reasoning_content, a Responses
                                      reasoning item's summary, an Anthropic thinking block
- {"signature": str, "index": int}    the signature that completes a thinking block
- {"refusal": str}                    a refusal's text
- {"call": {"index"?, "id"?, "name"?, "arguments"?: str}}   a tool call, started or extended
- {"block": {...}, "index": int}      an Anthropic content block as it starts
- {"citation": {...}, "index": int}   a citation added to a text block
- {"part": {...}}                     a Gemini part that arrives whole (a function call,
                                      inline data, code: domain/gemini_stream.py)

A provider's own stream events are accepted as they come and read into that form
(`neutral_deltas`): Chat Completions chunks (or their `delta`), Responses stream events
(`response.output_text.delta`, ...), Anthropic stream events (`content_block_start`,
`content_block_delta`, ...), Gemini's streamed GenerateContentResponse chunks. Events that carry nothing for the message (`ping`,
`content_block_stop`, `response.created`, ...) are skipped.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ctxstore.domain import gemini_stream
from ctxstore.domain.errors import InvalidMessageError, InvalidOperationError
from ctxstore.domain.gemini import GEMINI
from ctxstore.domain.json_values import json_problem
from ctxstore.domain.plain import as_plain
from ctxstore.domain.shapes import ANTHROPIC, RESPONSES

JSON = dict[str, Any]
INCOMPLETE = "ctxstore_incomplete"  # the metadata key marking a message being streamed
STREAMING, ABANDONED = "streaming", "abandoned"
KINDS = ("text", "reasoning", "signature", "refusal", "call", "block", "citation", "part")
MAX_DELTAS = 10_000  # one append's deltas, at most


def incomplete_state(message: Any) -> str | None:
    """ "streaming" or "abandoned" for an incomplete message (a Message or its JSON), else None."""
    metadata = message.get("metadata") if isinstance(message, dict) else message.metadata
    marker = metadata.get(INCOMPLETE) if isinstance(metadata, dict) else None
    return str(marker.get("state")) if isinstance(marker, dict) else None


def marked(message: JSON, state: str, reason: str | None = None) -> JSON:
    """A copy of a stored message carrying the incomplete marker in `state`."""
    metadata = dict(message.get("metadata") or {})
    marker = dict(metadata.get(INCOMPLETE) or {})
    marker["state"] = state
    if reason is not None:
        marker["reason"] = reason
    metadata[INCOMPLETE] = marker
    return {**message, "metadata": metadata}


# ---- reading deltas -------------------------------------------------------------------


def neutral_deltas(raw: Any) -> list[JSON]:
    """The deltas of one append in the neutral form, consecutive ones of one kind joined;
    raises InvalidOperationError naming a delta that is neither neutral nor a provider's
    stream event."""
    if isinstance(raw, dict) or callable(getattr(raw, "model_dump", None)):
        raw = [raw]
    if isinstance(raw, str) or not isinstance(raw, Sequence):
        raise InvalidOperationError("append needs a delta or a list of deltas")
    if len(raw) > MAX_DELTAS:
        raise InvalidOperationError(f"one append takes at most {MAX_DELTAS} deltas")
    found: list[JSON] = []
    for n, item in enumerate(raw):
        if type(item) is dict and len(item) == 1 and _plain_text(item.get("text")):
            _join(found, item)  # the common case: {"text": ...}, checked here and done
            continue
        plain = as_plain(item)
        if not isinstance(plain, dict):
            raise InvalidOperationError(f"delta {n}: a JSON object, not {type(plain).__name__}")
        problem = json_problem(plain)
        if problem is not None:
            raise InvalidOperationError(f"delta {n}: {problem}")
        for delta in _read(plain, n):
            _join(found, delta)
    return found


def _plain_text(value: Any) -> bool:
    """A str that is valid Unicode (storable as JSON text)."""
    if type(value) is not str:
        return False
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _read(event: JSON, n: int) -> list[JSON]:
    kind = event.get("type")
    if isinstance(kind, str) and kind.startswith("response."):
        return _responses_event(event, kind)
    if kind in _ANTHROPIC_EVENTS:
        return _anthropic_event(event, str(kind))
    if gemini_stream.is_chunk(event):
        return gemini_stream.chunk_deltas(event)
    if "choices" in event:  # a Chat Completions chunk: its first choice's delta
        choices = event["choices"]
        if not isinstance(choices, list):
            raise InvalidOperationError(f"delta {n}: a chunk's choices must be a list")
        return _chat_delta(choices[0].get("delta") or {}, n) if choices else []
    if set(event) & set(KINDS):
        return [_checked(event, n)]
    if set(event) & {"content", "tool_calls", "reasoning_content", "role"}:
        return _chat_delta(event, n)
    raise InvalidOperationError(
        f"delta {n}: not a delta ({', '.join(KINDS)}) nor a Chat Completions chunk, Responses "
        f"or Anthropic stream event: keys {sorted(event)[:8]}"
    )


def _checked(delta: JSON, n: int) -> JSON:
    kinds = [k for k in KINDS if k in delta]
    extra = set(delta) - set(KINDS) - {"index"}
    if len(kinds) != 1 or extra:
        raise InvalidOperationError(
            f"delta {n}: exactly one of {', '.join(KINDS)} (and an optional index), got "
            f"{sorted(delta)}"
        )
    kind = kinds[0]
    index = delta.get("index")
    if index is not None and (isinstance(index, bool) or not isinstance(index, int) or index < 0):
        raise InvalidOperationError(f"delta {n}: index must be a non-negative integer")
    value = delta[kind]
    if kind in ("call", "block", "citation", "part"):
        if not isinstance(value, dict):
            raise InvalidOperationError(f"delta {n}: {kind} must be a JSON object")
        if kind == "call":
            _check_call(value, n)
        if kind == "block" and not isinstance(value.get("type"), str):
            raise InvalidOperationError(f"delta {n}: a block needs its type")
        if kind in ("block", "citation", "signature") and index is None:
            raise InvalidOperationError(f"delta {n}: a {kind} names the block's index")
    elif not isinstance(value, str):
        raise InvalidOperationError(f"delta {n}: {kind} must be a string")
    return delta


def _check_call(call: JSON, n: int) -> None:
    extra = set(call) - {"index", "id", "name", "arguments"}
    if extra:
        raise InvalidOperationError(f"delta {n}: a call has index, id, name, arguments: {extra}")
    for key in ("id", "name", "arguments"):
        if key in call and not isinstance(call[key], str):
            raise InvalidOperationError(f"delta {n}: a call's {key} must be a string")
    index = call.get("index", 0)
    if isinstance(index, bool) or not isinstance(index, int) or index < 0:
        raise InvalidOperationError(f"delta {n}: a call's index must be a non-negative integer")


def _chat_delta(delta: JSON, n: int) -> list[JSON]:
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
        _check_call(made, n)
        found.append({"call": made})
    return found


_RESPONSES_TEXT = {
    "response.output_text.delta": ("text", "content_index"),
    "response.reasoning_summary_text.delta": ("reasoning", "summary_index"),
    "response.refusal.delta": ("refusal", None),
}


def _responses_event(event: JSON, kind: str) -> list[JSON]:
    delta = event.get("delta")
    if kind in _RESPONSES_TEXT and isinstance(delta, str):
        key, index_key = _RESPONSES_TEXT[kind]
        made: JSON = {key: delta}
        if index_key is not None and isinstance(event.get(index_key), int):
            made["index"] = event[index_key]
        return [made]
    if kind in ("response.function_call_arguments.delta", "response.custom_tool_call_input.delta"):
        return [{"call": {"arguments": str(delta)}}] if isinstance(delta, str) else []
    return []  # created, in_progress, part added/done, item added/done, ...: nothing to add


_ANTHROPIC_EVENTS = {
    "message_start", "message_delta", "message_stop", "content_block_start",
    "content_block_delta", "content_block_stop", "ping",
}  # fmt: skip
_ANTHROPIC_DELTAS = {
    "text_delta": ("text", "text"), "thinking_delta": ("reasoning", "thinking"),
    "signature_delta": ("signature", "signature"),
}  # fmt: skip


def _anthropic_event(event: JSON, kind: str) -> list[JSON]:
    index = event.get("index")
    if kind == "content_block_start" and isinstance(event.get("content_block"), dict):
        return [{"block": event["content_block"], "index": index}]
    if kind != "content_block_delta" or not isinstance(event.get("delta"), dict):
        return []
    delta = event["delta"]
    kind = str(delta.get("type"))
    if kind in _ANTHROPIC_DELTAS:
        key, field = _ANTHROPIC_DELTAS[kind]
        return [{key: str(delta.get(field, "")), "index": index}]
    if kind == "input_json_delta":
        return [{"call": {"index": index, "arguments": str(delta.get("partial_json", ""))}}]
    if kind == "citations_delta" and isinstance(delta.get("citation"), dict):
        return [{"citation": delta["citation"], "index": index}]
    return []


def _join(found: list[JSON], delta: JSON) -> None:
    """Add a delta, joined to the one before when both extend the same text."""
    if found:
        last = found[-1]
        for key in ("text", "reasoning", "refusal", "signature"):
            if key in delta and key in last and last.get("index") == delta.get("index"):
                found[-1] = {**last, key: last[key] + delta[key]}
                return
        if "call" in delta and "call" in last:
            before, now = last["call"], delta["call"]
            if set(now) <= {"index", "arguments"} and before.get("index", 0) == now.get("index", 0):
                joined = before.get("arguments", "") + now.get("arguments", "")
                found[-1] = {"call": {**before, "arguments": joined}}
                return
    found.append(delta)


def join_into(kept: list[JSON], later: list[JSON]) -> None:
    """Add a run of neutral deltas to `kept`, joined (what a batching writer stores in one
    event)."""
    for delta in later:
        _join(kept, delta)


def delta_chars(deltas: list[JSON]) -> int:
    """How much text a run of deltas carries (what a batching writer measures)."""
    total = 0
    for d in deltas:
        for key in ("text", "reasoning", "refusal", "signature"):
            total += len(d.get(key, ""))
        total += len(d.get("call", {}).get("arguments", ""))
    return total


# ---- applying deltas ------------------------------------------------------------------


def apply_deltas(message: JSON, deltas: list[JSON]) -> JSON:
    """The stored message with neutral deltas applied, in its own shape (a new JSON object;
    the message given is not changed). Raises InvalidOperationError for a delta its shape
    cannot hold."""
    fmt = message.get("format")
    if fmt in (ANTHROPIC, GEMINI):
        native = json.loads(json.dumps(message["native"]))
        partial = dict((message.get("metadata", {}).get(INCOMPLETE) or {}).get("partial") or {})
        for d in deltas:
            if fmt == GEMINI:
                gemini_stream.apply(native, d, partial)
            else:
                _anthropic_apply(native, d, partial)
        out = {**message, "native": native}
        if partial:
            metadata = dict(out["metadata"])
            metadata[INCOMPLETE] = {**metadata.get(INCOMPLETE, {}), "partial": partial}
            out["metadata"] = metadata
        return out
    if fmt == RESPONSES:
        native = json.loads(json.dumps(message["native"]))
        for d in deltas:
            _responses_apply(native, d)
        return {**message, "native": native}
    chat: JSON = json.loads(json.dumps(message))
    for d in deltas:
        _chat_apply(chat, d)
    return chat


def _chat_apply(msg: JSON, d: JSON) -> None:
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
        raise InvalidOperationError(f"a chat message cannot take a {_kind(d)} delta")


def _responses_apply(item: JSON, d: JSON) -> None:
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
        raise InvalidOperationError(f"a Responses {kind} item cannot take a {_kind(d)} delta")


def _anthropic_apply(native: JSON, d: JSON, partial: dict[str, str]) -> None:
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
        want = {"text": "text", "reasoning": "thinking"}.get(_kind(d))
        found = [n for n, b in enumerate(content) if b.get("type") == want]
        index = found[-1] if found else len(content)
    if index >= len(content):
        start = {"text": {"type": "text", "text": ""},
                 "reasoning": {"type": "thinking", "thinking": ""}}.get(_kind(d))  # fmt: skip
        if start is None:
            raise InvalidOperationError(f"a {_kind(d)} delta names block {index}, not started")
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
    elif "call" in d and block.get("type") in ("tool_use", "server_tool_use", "mcp_tool_use"):
        partial[str(index)] = partial.get(str(index), "") + d["call"].get("arguments", "")
    else:
        raise InvalidOperationError(
            f"Anthropic block {index} ({block.get('type')}) cannot take a {_kind(d)} delta"
        )


def _place(content: list[JSON], index: int | None, block: JSON) -> None:
    at = len(content) if index is None else index
    if at > len(content):
        raise InvalidOperationError(f"block {at} starts before block {len(content)}")
    if at == len(content):
        content.append(block)
    else:
        content[at] = block


def _kind(d: JSON) -> str:
    return next(k for k in KINDS if k in d)


# ---- finishing ------------------------------------------------------------------------


def finalized(message: JSON) -> JSON:
    """A streamed message as it stands once complete: tool inputs that streamed as JSON text
    parsed into their blocks, the marker gone. Raises InvalidMessageError when a tool's
    input did not arrive as complete JSON (finish it with the message, or abandon it)."""
    metadata = dict(message.get("metadata") or {})
    marker = metadata.pop(INCOMPLETE, None) or {}
    out = {**message, "metadata": metadata}
    partial = marker.get("partial") or {}
    if partial and message.get("format") == GEMINI:
        out["native"] = gemini_stream.finish(message["native"], partial)
    elif partial and message.get("format") == ANTHROPIC:
        native = json.loads(json.dumps(message["native"]))
        for index, text in partial.items():
            try:
                value = json.loads(text) if text.strip() else {}
            except ValueError:
                raise InvalidMessageError(
                    f"tool input of block {index} is not complete JSON ({text[-40:]!r})"
                ) from None
            native["content"][int(index)]["input"] = value
        out["native"] = native
    return out


__all__ = [
    "ABANDONED",
    "INCOMPLETE",
    "STREAMING",
    "apply_deltas",
    "delta_chars",
    "finalized",
    "incomplete_state",
    "join_into",
    "marked",
    "neutral_deltas",
]
