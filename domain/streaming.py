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
`content_block_stop`, `response.created`, ...) are skipped. Each shape reads its provider's
events and applies deltas to its messages (domain/shapes/); this module checks and joins.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ctxstore.domain.errors import InvalidOperationError
from ctxstore.domain.json_values import json_problem
from ctxstore.domain.plain import as_plain
from ctxstore.domain.shapes import READ_ORDER, stored_shape
from ctxstore.domain.shapes.chat_stream import chat_delta
from ctxstore.domain.shapes.deltas import KINDS, check_call

JSON = dict[str, Any]
INCOMPLETE = "ctxstore_incomplete"  # the metadata key marking a message being streamed
STREAMING, ABANDONED = "streaming", "abandoned"
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
    for shape in READ_ORDER:  # a provider's stream event (a chunk, ...)
        found = shape.stream_deltas(event, n)
        if found is not None:
            return found
    if set(event) & set(KINDS):
        return [_checked(event, n)]
    if set(event) & {"content", "tool_calls", "reasoning_content", "role"}:
        return chat_delta(event, n)  # a Chat Completions chunk's delta, given bare
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
            check_call(value, n)
        if kind == "block" and not isinstance(value.get("type"), str):
            raise InvalidOperationError(f"delta {n}: a block needs its type")
        if kind in ("block", "citation", "signature") and index is None:
            raise InvalidOperationError(f"delta {n}: a {kind} names the block's index")
    elif not isinstance(value, str):
        raise InvalidOperationError(f"delta {n}: {kind} must be a string")
    return delta


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
    shape, payload = stored_shape(message)
    payload = json.loads(json.dumps(payload))
    partial = dict((message.get("metadata", {}).get(INCOMPLETE) or {}).get("partial") or {})
    for d in deltas:
        shape.apply_delta(payload, d, partial)
    out = {**message, "native": payload} if shape.native else payload
    if partial:  # what streams as text until the reply finishes (a tool's JSON input)
        metadata = dict(out["metadata"])
        metadata[INCOMPLETE] = {**metadata.get(INCOMPLETE, {}), "partial": partial}
        out["metadata"] = metadata
    return out


# ---- finishing ------------------------------------------------------------------------


def finalized(message: JSON) -> JSON:
    """A streamed message as it stands once complete: tool inputs that streamed as JSON text
    parsed into their blocks, the marker gone. Raises InvalidMessageError when a tool's
    input did not arrive as complete JSON (finish it with the message, or abandon it)."""
    metadata = dict(message.get("metadata") or {})
    marker = metadata.pop(INCOMPLETE, None) or {}
    out = {**message, "metadata": metadata}
    partial = marker.get("partial") or {}
    shape, payload = stored_shape(message)
    if partial and shape.native:
        out["native"] = shape.finished(payload, partial)
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
