"""What a prompt sends of a reply that did not finish streaming (the repair policy).

An incomplete message (streaming, or abandoned: domain/streaming.py) is visible as it
stands; a request built from the context sends it repaired, so that no provider refuses it:

- the text that arrived is sent as the reply's text (chat content, a Responses message
  with status "incomplete", Anthropic text blocks; the newest message's trailing
  whitespace removed, which Anthropic refuses at the end of a prompt); empty text is not;
- a tool call is dropped unless a later message answers it (a half-written call was never
  run, and a call without its result is refused);
- reasoning goes only with its turn: a Responses reasoning item or an Anthropic thinking
  block that did not finish (no signature) is dropped (a Gemini turn of thoughts only is), and so is a finished reasoning item
  whose following item was dropped;
- what is left with nothing to send is dropped whole; every drop is reported.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ctxstore.domain.gemini import GEMINI, field
from ctxstore.domain.shapes import ANTHROPIC, RESPONSES
from ctxstore.domain.streaming import INCOMPLETE

if TYPE_CHECKING:
    from ctxstore.domain.messages import Message

JSON = dict[str, Any]
_TOOL_BLOCKS = ("tool_use", "server_tool_use", "mcp_tool_use")


def repair(messages: Sequence[Message]) -> tuple[list[Message], list[JSON]]:
    """The messages with each incomplete one repaired (or dropped), and what was dropped:
    {"id", "what", "why"}. Messages that are complete come back as they are."""
    incomplete = [n for n, m in enumerate(messages) if INCOMPLETE in m.metadata]
    if not incomplete:
        return list(messages), []
    # Which calls later messages answer: needed only when an incomplete message makes one.
    calling = any(_makes_calls(messages[n]) for n in incomplete)
    answered = _answers_after(messages) if calling else None
    out: list[Message] = []
    notes: list[JSON] = []
    todo = set(incomplete)
    for n, m in enumerate(messages):
        if n not in todo:
            out.append(m)
            continue
        later = set() if answered is None else answered[n]
        fixed = _repaired(m, later, n == len(messages) - 1, notes)
        if fixed is None:
            notes.append({"id": m.id, "what": "message", "why": "incomplete: nothing sendable"})
            _drop_orphan_reasoning(out, m, notes)
        else:
            out.append(fixed)
    return out, notes


def _makes_calls(m: Message) -> bool:
    content = (m.native or {}).get("content") if m.format == ANTHROPIC else None
    if isinstance(content, list):
        return any(isinstance(b, dict) and b.get("type") in _TOOL_BLOCKS for b in content)
    return bool(m.call_ids)


def _answers_after(messages: Sequence[Message]) -> list[set[str]]:
    """For each position, the call ids that messages after it answer."""
    found: list[set[str]] = [set() for _ in messages]
    seen: set[str] = set()
    for n in range(len(messages) - 1, -1, -1):
        found[n] = set(seen)
        m = messages[n]
        if m.native is not None:
            seen.update(m.shape.answers if m.shape else ())
            if m.format == ANTHROPIC:  # a hosted tool's result answers in the same message
                seen.update(_hosted_answers(m.native))
        elif m.tool_call_id:
            seen.add(m.tool_call_id)
    return found


def _hosted_answers(native: JSON) -> set[str]:
    content = native.get("content")
    if not isinstance(content, list):
        return set()
    return {str(b["tool_use_id"]) for b in content if isinstance(b, dict) and "tool_use_id" in b}


def _repaired(m: Message, answered: set[str], last: bool, notes: list[JSON]) -> Message | None:
    if m.format == ANTHROPIC and m.native is not None:
        return _anthropic(m, answered | _hosted_answers(m.native), last, notes)
    if m.format == RESPONSES and m.native is not None:
        return _responses(m, answered, last, notes)
    if m.format == GEMINI and m.native is not None:
        return _gemini(m, answered, last, notes)
    return _chat(m, answered, last, notes)


def _gemini(m: Message, answered: set[str], last: bool, notes: list[JSON]) -> Message | None:
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


def _chat(m: Message, answered: set[str], last: bool, notes: list[JSON]) -> Message | None:
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


def _responses(m: Message, answered: set[str], last: bool, notes: list[JSON]) -> Message | None:
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


def _anthropic(m: Message, answered: set[str], last: bool, notes: list[JSON]) -> Message | None:
    native: JSON = dict(m.native or {})
    content = native.get("content")
    blocks: list[Any] = (
        [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
    )
    kept: list[JSON] = []
    for b in blocks:
        kind = b.get("type")
        if kind in _TOOL_BLOCKS and b.get("id") not in answered:
            notes.append(
                {"id": m.id, "what": f"{kind} {b.get('id')}", "why": "incomplete: not run"}
            )
        elif kind == "thinking" and not b.get("signature"):
            notes.append({"id": m.id, "what": "thinking", "why": "incomplete: unsigned"})
        elif kind == "text" and not str(b.get("text", "")).strip():
            continue
        else:
            kept.append(b)
    if last:
        kept = _without_trailing_space(kept)
    if not any(b.get("type") not in ("thinking", "redacted_thinking") for b in kept):
        return None
    native["content"] = kept
    return m.model_copy(update={"native": native})


def _without_trailing_space(blocks: list[JSON]) -> list[JSON]:
    if blocks and blocks[-1].get("type") == "text":
        return [*blocks[:-1], {**blocks[-1], "text": str(blocks[-1]["text"]).rstrip()}]
    return blocks


def _has_text(part: Any) -> bool:
    if not isinstance(part, dict):
        return False
    value = part.get("text", part.get("refusal"))
    return isinstance(value, str) and bool(value.strip())


def _drop_orphan_reasoning(out: list[Message], dropped: Message, notes: list[JSON]) -> None:
    """A Responses reasoning item goes with the item after it: when that was dropped, so is
    the reasoning item before it."""
    if dropped.format != RESPONSES or not out:
        return
    before = out[-1]
    if before.format == RESPONSES and (before.native or {}).get("type") == "reasoning":
        out.pop()
        notes.append({"id": before.id, "what": "reasoning", "why": "its turn did not finish"})


__all__ = ["repair"]
