"""A Gemini reply as it streams (domain/streaming.py's neutral deltas, for the Gemini shape).

`generate_content_stream` yields GenerateContentResponse chunks; each carries the new
parts of the first candidate's content: text pieces (a thought's when `thought` is set),
whole function calls, inline data or code, a `thought_signature` on the part it closes.
They are read into neutral deltas — {"text"}, {"reasoning"}, {"signature"} and, for a part
that arrives whole, {"part": <the part as it came>} — and applied to a Content: text joins
the text part before it (a thought's to a thought's), unless that part was closed by its
signature; a whole part is added as it came. A tool call streamed from another shape's
events ({"call"}) becomes a function_call part whose arguments are parsed when it finishes.
A reply that did not finish is repaired for a prompt (domain/stream_repair.py): its function
calls no later turn answers and its empty text dropped, a turn of thoughts only dropped.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ctxstore.domain.errors import InvalidMessageError, InvalidOperationError
from ctxstore.domain.gemini import field

if TYPE_CHECKING:
    from ctxstore.domain.messages import Message

JSON = dict[str, Any]


def is_chunk(event: JSON) -> bool:
    return isinstance(event.get("candidates"), list)


def chunk_deltas(event: JSON) -> list[JSON]:
    """The neutral deltas of one streamed GenerateContentResponse."""
    candidates = event["candidates"]
    content = field(candidates[0], "content") if candidates else None
    found: list[JSON] = []
    for part in (content or {}).get("parts") or [] if isinstance(content, dict) else []:
        if not isinstance(part, dict):
            continue
        text = field(part, "text")
        signature = field(part, "thought_signature")
        rest = set(part) - {"text", "thought", "thought_signature", "thoughtSignature"}
        if isinstance(text, str) and not rest:
            if text:
                found.append({"reasoning" if field(part, "thought") else "text": text})
            if signature is not None:
                found.append({"signature": str(signature)})
        else:
            found.append({"part": part})
    return found


def apply(native: JSON, d: JSON, partial: dict[str, str]) -> None:
    """Apply one neutral delta to a Gemini Content being streamed (see the module)."""
    parts: list[JSON] = native.setdefault("parts", [])
    last = parts[-1] if parts else None
    if "part" in d:
        parts.append(dict(d["part"]))
    elif "text" in d or "reasoning" in d:
        thought = "reasoning" in d
        text = d["reasoning"] if thought else d["text"]
        if (
            last is not None and isinstance(field(last, "text"), str)
            and bool(field(last, "thought")) == thought
            and field(last, "thought_signature") is None
        ):  # fmt: skip
            last["text"] = last["text"] + text
        else:
            parts.append({"text": text, "thought": True} if thought else {"text": text})
    elif "signature" in d:
        if last is None:
            raise InvalidOperationError("a thought signature arrived before any part")
        key = "thoughtSignature" if "thoughtSignature" in last else "thought_signature"
        last[key] = str(last.get(key) or "") + d["signature"]
    elif "call" in d:
        call = d["call"]
        index = call.get("index", 0)
        calls = [n for n, p in enumerate(parts) if field(p, "function_call") is not None]
        if index >= len(calls):
            if not call.get("name"):
                raise InvalidOperationError(f"function call {index} starts without its name")
            started: JSON = {"name": call["name"], "args": {}}
            if call.get("id"):
                started["id"] = call["id"]
            parts.append({"function_call": started})
            calls.append(len(parts) - 1)
        at = str(calls[index])
        partial[at] = partial.get(at, "") + call.get("arguments", "")
    else:
        kind = next(iter(d))
        raise InvalidOperationError(f"a Gemini Content cannot take a {kind} delta")


def finish(native: JSON, partial: dict[str, str]) -> JSON:
    """The Content with the arguments of streamed calls parsed into their parts."""
    done: JSON = json.loads(json.dumps(native))
    for at, text in partial.items():
        try:
            args = json.loads(text) if text.strip() else {}
        except ValueError:
            raise InvalidMessageError(
                f"arguments of part {at} are not complete JSON ({text[-40:]!r})"
            ) from None
        field(done["parts"][int(at)], "function_call")["args"] = args
    return done


def repaired(m: Message, answered: set[str], last: bool, notes: list[JSON]) -> Message | None:
    """The Content as a prompt sends it (see the module), None when nothing is left."""
    native: JSON = dict(m.native or {})
    calls = iter(m.call_ids)  # the pairing keys of its function calls, in order
    kept: list[JSON] = []
    for part in native.get("parts") or []:
        call = field(part, "function_call")
        text = field(part, "text")
        if call is not None:
            key = next(calls)
            if key not in answered:
                notes.append(
                    {"id": m.id, "what": f"function_call {key}", "why": "incomplete: not run"}
                )
                continue
        elif (
            isinstance(text, str) and not text.strip() and field(part, "thought_signature") is None
        ):
            continue
        kept.append(part)
    if last and kept and isinstance(field(kept[-1], "text"), str):
        kept[-1] = {**kept[-1], "text": str(field(kept[-1], "text")).rstrip()}
    if not any(not field(p, "thought") for p in kept):
        return None
    native["parts"] = kept
    return m.model_copy(update={"native": native})
