"""Well-formedness of a transcript: every tool result sits in the block of the call it answers.

A block is an assistant message with tool calls followed directly by tool messages that
answer those calls. A block may still wait for results only while it is the transcript's
tail (the conversation is mid-turn); any other message after it needs every call answered.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxstore.domain.errors import MalformedTranscriptError


@dataclass
class OpenBlock:
    """The assistant message whose tool calls the following tool messages answer."""

    assistant_id: str
    calls: list[str]
    answered: set[str] = field(default_factory=set)

    @property
    def unanswered(self) -> list[str]:
        return [c for c in self.calls if c not in self.answered]


@dataclass
class TranscriptScanner:
    """Feeds messages in order and refuses the first one that breaks the transcript."""

    block: OpenBlock | None = None

    def feed(self, msg_id: str, message: Mapping[str, Any]) -> None:
        role = message["role"]
        if role == "tool":
            call_id = message.get("tool_call_id")
            if self.block is None:
                raise MalformedTranscriptError(
                    f"tool message {msg_id!r} (tool_call_id {call_id!r}) does not follow "
                    "the assistant message that made the call"
                )
            if call_id not in self.block.calls:
                raise MalformedTranscriptError(
                    f"tool message {msg_id!r} answers tool_call_id {call_id!r}, which "
                    f"assistant message {self.block.assistant_id!r} did not make"
                )
            if call_id in self.block.answered:
                raise MalformedTranscriptError(
                    f"tool message {msg_id!r} answers tool_call_id {call_id!r} a second time"
                )
            self.block.answered.add(call_id)
            return
        if self.block is not None and self.block.unanswered:
            raise MalformedTranscriptError(
                f"{role} message {msg_id!r} would separate tool call(s) {self.block.unanswered} of "
                f"assistant message {self.block.assistant_id!r} from their results"
            )
        self.block = None
        calls = message.get("tool_calls")
        if role == "assistant" and calls:
            self.block = OpenBlock(msg_id, [c["id"] for c in calls])

    def feed_all(self, items: Iterable[tuple[str, Mapping[str, Any]]]) -> None:
        for msg_id, message in items:
            self.feed(msg_id, message)


def check_transcript(items: Iterable[tuple[str, Mapping[str, Any]]]) -> None:
    """Raise MalformedTranscriptError at the first message that breaks tool-call pairing."""
    TranscriptScanner().feed_all(items)


def tail_scanner(
    order: Sequence[str], messages: Mapping[str, Mapping[str, Any]]
) -> TranscriptScanner:
    """A scanner in the state it would have after the whole transcript, built from its tail."""
    i = len(order) - 1
    answered: list[str] = []
    while i >= 0 and messages[order[i]]["role"] == "tool":
        answered.append(messages[order[i]]["tool_call_id"])
        i -= 1
    if i < 0:
        return TranscriptScanner()
    last = messages[order[i]]
    if last["role"] == "assistant" and last.get("tool_calls"):
        block = OpenBlock(order[i], [c["id"] for c in last["tool_calls"]], set(answered))
        return TranscriptScanner(block)
    return TranscriptScanner()


def pairing_closure_violation(
    chosen: set[str], order: Sequence[str], messages: Mapping[str, Mapping[str, Any]]
) -> str | None:
    """Describe how `chosen` splits a tool call from its result, or None if it takes whole blocks.

    Used by delete and compress: the ids they take must contain each block entirely.
    """
    block_of: dict[str, str] = {}  # message id -> id of the assistant message heading its block
    members: dict[str, list[str]] = {}
    head: str | None = None
    for msg_id in order:
        message = messages[msg_id]
        if message["role"] == "tool" and head is not None:
            block_of[msg_id] = head
            members[head].append(msg_id)
            continue
        head = msg_id if message["role"] == "assistant" and message.get("tool_calls") else None
        if head is not None:
            block_of[msg_id] = head
            members[head] = [msg_id]
    for msg_id in order:
        if msg_id not in chosen or msg_id not in block_of:
            continue
        head = block_of[msg_id]
        left_out = [m for m in members[head] if m not in chosen]
        if left_out:
            return (
                f"message {msg_id!r} belongs with {left_out} (a tool call and its results "
                f"under assistant message {head!r}); take them together"
            )
    return None
