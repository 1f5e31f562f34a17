"""Well-formedness of a transcript: every tool result sits in the block of the call it answers.

A block is a message making calls followed by the messages that answer them, by each
shape's own pairing (domain/shapes/): chat `tool_calls[].id` answered by tool messages
right after it (a legacy `function_call` by the `function` message naming its function); Responses `call_id` answered by `*_output` items (more calls and reasoning
items of the same turn may come between); Anthropic `tool_use.id` answered, all of them,
by the tool_result blocks of the very next user message. A block may still wait for
results only while it is the transcript's tail (mid-turn); any other message after it
needs every call answered. A Responses reasoning item belongs to the item after it: the
two are taken (deleted, compressed, left out of a prompt) together. A record (kept in the
history, never sent to a model) stands outside these rules: it may sit anywhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ctxstore.domain.errors import MalformedTranscriptError
from ctxstore.domain.plain import is_record
from ctxstore.domain.shapes import CHAT, SHAPES, Native, stored_shape

if TYPE_CHECKING:
    from ctxstore.domain.messages import Message

Pairing = Native  # what the rules read from one message (as stored JSON)


def pairing(message: Mapping[str, Any]) -> Pairing:
    """What the rules read from a message as stored (or as `pairing_fields` gives it)."""
    shape, payload = stored_shape(message)
    return shape.read(payload)


def pairing_fields(m: Message) -> dict[str, Any]:
    """What `pairing` reads of a message, without dumping the whole message."""
    if m.native is not None:
        return {"role": m.role, "format": m.format, "native": m.native}
    legacy = None if m.function_call is None else {"name": m.function_call.name}
    return {"role": m.role, "tool_calls": [{"id": c} for c in m.call_ids],
            "tool_call_id": m.tool_call_id, "name": m.name, "function_call": legacy}  # fmt: skip


def _in_turn(seen: Pairing) -> bool:
    """Whether a message is a further call or reasoning item of a turn still open (a shape
    whose turns come as items of their own)."""
    return SHAPES[seen.format].turn_in_items and (bool(seen.calls) or seen.reasoning)


@dataclass
class OpenBlock:
    """The assistant message whose tool calls the following tool messages answer."""

    assistant_id: str
    calls: list[str]
    answered: set[str] = field(default_factory=set)
    shape: str = CHAT

    @property
    def unanswered(self) -> list[str]:
        return [c for c in self.calls if c not in self.answered]


@dataclass
class TranscriptScanner:
    """Feeds messages in order and refuses the first one that breaks the transcript."""

    block: OpenBlock | None = None

    def feed(self, msg_id: str, message: Mapping[str, Any]) -> None:
        if is_record(message):
            return  # never sent to a model: it separates nothing
        seen = pairing(message)
        if seen.answers:
            self._answer(msg_id, seen)
            return
        block = self.block
        if block is not None and block.unanswered:
            if block.shape == seen.format and _in_turn(seen):
                block.calls.extend(seen.calls)  # the same turn's further calls
                return
            raise MalformedTranscriptError(
                f"{seen.role} message {msg_id!r} would separate tool call(s) "
                f"{block.unanswered} of message {block.assistant_id!r} from their results"
            )
        self.block = OpenBlock(msg_id, list(seen.calls), shape=seen.format) if seen.calls else None

    def _answer(self, msg_id: str, seen: Pairing) -> None:
        block = self.block
        if block is None:
            raise MalformedTranscriptError(
                f"{seen.role} message {msg_id!r} (answering {list(seen.answers)}) does not "
                "follow the message that made the call"
            )
        for call_id in seen.answers:
            if call_id not in block.calls:
                raise MalformedTranscriptError(
                    f"tool message {msg_id!r} answers tool_call_id {call_id!r}, which "
                    f"message {block.assistant_id!r} did not make"
                )
            if call_id in block.answered:
                raise MalformedTranscriptError(
                    f"tool message {msg_id!r} answers tool_call_id {call_id!r} a second time"
                )
        at_once = SHAPES[block.shape].answers_at_once
        if at_once and set(seen.answers) != set(block.unanswered):
            raise MalformedTranscriptError(
                f"message {msg_id!r} must answer every call (tool_use, function_call) of "
                f"{block.assistant_id!r} ({block.unanswered}) in one message, as "
                f"{block.shape} requires"
            )
        block.answered.update(seen.answers)

    def feed_all(self, items: Iterable[tuple[str, Mapping[str, Any]]]) -> None:
        for msg_id, message in items:
            self.feed(msg_id, message)


def check_transcript(items: Iterable[tuple[str, Mapping[str, Any]]]) -> None:
    """Raise MalformedTranscriptError at the first message that breaks tool-call pairing."""
    TranscriptScanner().feed_all(items)


def tail_scanner(
    order: Sequence[str], messages: Mapping[str, Mapping[str, Any]]
) -> TranscriptScanner:
    """A scanner in the state it would have after the whole transcript, built from its tail
    (the last block and the results after it)."""
    i = len(order) - 1
    while i >= 0:
        if is_record(messages[order[i]]):
            i -= 1
            continue
        seen = pairing(messages[order[i]])
        if seen.answers or _in_turn(seen):
            i -= 1  # a result, or a Responses call of the same turn: keep going back
            continue
        break
    scanner = TranscriptScanner()
    start = max(i, 0)
    if i >= 0 and not pairing(messages[order[i]]).calls:
        start = i + 1
    while start < len(order) and pairing(messages[order[start]]).answers:
        start += 1  # (a well-formed transcript never starts with a result)
    scanner.feed_all((m, messages[m]) for m in order[start:])
    return scanner


def check_placement(
    order: Sequence[str],
    messages: Mapping[str, Mapping[str, Any]],
    new: Sequence[Mapping[str, Any]],
    after_id: str | None,
) -> None:
    """Raise MalformedTranscriptError unless messages `new` (with their ids) may go after
    `after_id` (None: at the end); an append reads only the tail."""
    items = [(m["id"], m) for m in new]
    if after_id is None or after_id == order[-1]:
        tail_scanner(order, messages).feed_all(items)
        return
    at = order.index(after_id) + 1
    added = dict(items)
    ids = [*order[:at], *added, *order[at:]]
    check_transcript((i, added[i] if i in added else messages[i]) for i in ids)


def blocks_of(order: Sequence[str], messages: Mapping[str, Mapping[str, Any]]) -> dict[str, int]:
    """Message id -> the number of the block it belongs to (messages of no block absent):
    a call with its results (and a Responses turn's further calls), and a Responses
    reasoning item with the item after it."""
    block_of: dict[str, int] = {}
    current: int | None = None
    open_calls: set[str] = set()
    reasoning: list[str] = []
    count = 0
    for msg_id in order:
        if is_record(messages[msg_id]):
            continue  # in no block: taken or left alone
        seen = pairing(messages[msg_id])
        if seen.answers and current is not None:
            block_of[msg_id] = current
            open_calls.difference_update(seen.answers)
            continue
        joins = current is not None and bool(open_calls) and _in_turn(seen)
        if joins:
            assert current is not None
            block_of[msg_id] = current
            open_calls.update(seen.calls)
            continue
        if seen.reasoning:
            reasoning.append(msg_id)
            current, open_calls = None, set()
            continue
        if seen.calls or reasoning:
            count += 1
            current = count
            for r in reasoning:
                block_of[r] = current
            block_of[msg_id] = current
            open_calls = set(seen.calls)
            if not seen.calls:
                current = None  # reasoning with the message it led to
        else:
            current, open_calls = None, set()
        reasoning = []
    if reasoning:
        count += 1
        for r in reasoning:
            block_of[r] = count  # a tail of reasoning: together
    return block_of


def pairing_closure_violation(
    chosen: set[str], order: Sequence[str], messages: Mapping[str, Mapping[str, Any]]
) -> str | None:
    """Describe how `chosen` splits a tool call from its result, or None if it takes whole blocks.

    Used by delete and compress: the ids they take must contain each block entirely.
    """
    block_of = blocks_of(order, messages)
    members: dict[int, list[str]] = {}
    for msg_id, block in block_of.items():
        members.setdefault(block, []).append(msg_id)
    for msg_id in order:
        if msg_id not in chosen or msg_id not in block_of:
            continue
        left_out = [m for m in members[block_of[msg_id]] if m not in chosen]
        if left_out:
            return (
                f"message {msg_id!r} belongs with {left_out} (a tool call and its results, "
                "or reasoning and the item it led to); take them together"
            )
    return None
