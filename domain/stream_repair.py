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

Each shape repairs its own messages (domain/shapes/: `Shape.repaired`); this module finds
which calls later messages answer and drops reasoning left without its turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ctxstore.domain.shapes import message_shape
from ctxstore.domain.streaming import INCOMPLETE

if TYPE_CHECKING:
    from ctxstore.domain.messages import Message

JSON = dict[str, Any]


def repair(messages: Sequence[Message]) -> tuple[list[Message], list[JSON]]:
    """The messages with each incomplete one repaired (or dropped), and what was dropped:
    {"id", "what", "why"}. Messages that are complete come back as they are."""
    incomplete = [n for n, m in enumerate(messages) if INCOMPLETE in m.metadata]
    if not incomplete:
        return list(messages), []
    # Which calls later messages answer: needed only when an incomplete message makes one.
    calling = any(message_shape(messages[n]).makes_calls(messages[n]) for n in incomplete)
    answered = _answers_after(messages) if calling else None
    out: list[Message] = []
    notes: list[JSON] = []
    todo = set(incomplete)
    for n, m in enumerate(messages):
        if n not in todo:
            out.append(m)
            continue
        later = set() if answered is None else answered[n]
        fixed = message_shape(m).repaired(m, later, n == len(messages) - 1, notes)
        if fixed is None:
            notes.append({"id": m.id, "what": "message", "why": "incomplete: nothing sendable"})
            _drop_orphan_reasoning(out, m, notes)
        else:
            out.append(fixed)
    return out, notes


def _answers_after(messages: Sequence[Message]) -> list[set[str]]:
    """For each position, the call ids that messages after it answer."""
    found: list[set[str]] = [set() for _ in messages]
    seen: set[str] = set()
    for n in range(len(messages) - 1, -1, -1):
        found[n] = set(seen)
        m = messages[n]
        seen.update(message_shape(m).answered_by(m))
    return found


def _drop_orphan_reasoning(out: list[Message], dropped: Message, notes: list[JSON]) -> None:
    """Reasoning goes with the item after it (a Responses reasoning item): when that was
    dropped, so is the reasoning before it."""
    if not out or not message_shape(dropped).drops_before(out[-1]):
        return
    before = out.pop()
    notes.append({"id": before.id, "what": "reasoning", "why": "its turn did not finish"})


__all__ = ["repair"]
