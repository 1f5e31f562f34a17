"""A reply being stored while it streams: the handle that batches its deltas into events.

Every delta is not an event: the handle keeps the deltas that arrive (joined: consecutive
text becomes one string) and writes them as one `MessageDeltas` event when the oldest kept
delta is `interval` seconds old or `max_chars` of text are kept, whichever comes first, and
with the finish (one write: the last deltas and the finish). A reply that streams in one
second with the defaults costs its begin, about four appends and its finish, however many
deltas it came in. What a process that dies mid-stream loses is at most the deltas kept
since the last write; the message stays incomplete and readable, and a later `finish` or
`abandon` (by id) closes it.

The handle works over any surface with begin/append/finish/abandon (the store in process,
the HTTP client).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol, Self
from uuid import UUID

from ctxstore.adapters.store.faults import type_faults
from ctxstore.adapters.store.results import Written
from ctxstore.domain.context import JSON, MessageRef
from ctxstore.domain.errors import InvalidOperationError
from ctxstore.domain.shapes import CHAT, FORMATS, shape_named
from ctxstore.domain.streaming import delta_chars, join_into, neutral_deltas


class StreamOps(Protocol):
    """The four operations a reply stream is made of."""

    def begin(
        self, context_id: UUID | str, message: Any = None, *, after: MessageRef | None = None,
        format: str | None = None,
    ) -> Written: ...  # fmt: skip

    def append(self, context_id: UUID | str, message_id: MessageRef, deltas: Any) -> Written: ...

    def finish(
        self, context_id: UUID | str, message_id: MessageRef, message: Any = None, *,
        deltas: Any = None,
    ) -> Written: ...  # fmt: skip

    def abandon(
        self, context_id: UUID | str, message_id: MessageRef, *, reason: str | None = None,
        keep: bool = True, deltas: Any = None,
    ) -> Written: ...  # fmt: skip


@dataclass(frozen=True)
class StreamPolicy:
    """When kept deltas are written: the oldest is `interval` seconds old, or `max_chars` of
    text are kept (and always with the finish or abandon)."""

    interval: float = 0.25
    max_chars: int = 16_384

    def __post_init__(self) -> None:
        if not (0 <= self.interval <= 3600 and 1 <= self.max_chars <= 10_000_000):
            raise InvalidOperationError(
                "a stream policy's interval is 0..3600 seconds and max_chars 1..10,000,000"
            )


def opening_message(message: Any, format: str | None) -> Any:
    """How a streamed reply starts: the message given, else an empty assistant message of
    the shape named (chat by default)."""
    if message is not None:
        return message
    shape = shape_named(format or CHAT)
    if shape is None:
        raise InvalidOperationError(f"format must be one of {', '.join(FORMATS)}")
    return shape.opening()


class KeptDeltas:
    """The deltas a streaming reply keeps until they are due to be written (the policy)."""

    def __init__(self, policy: StreamPolicy) -> None:
        self.policy = policy
        self._kept: list[JSON] = []
        self._since = 0.0
        self._chars = 0

    def keep(self, deltas: Any) -> bool:
        """Take deltas (neutral, or a provider's stream events); whether a write is due."""
        found = neutral_deltas(list(deltas))
        if not found:
            return False
        if not self._kept:
            self._since = time.monotonic()
        join_into(self._kept, found)
        self._chars += delta_chars(found)
        return (
            self._chars >= self.policy.max_chars
            or time.monotonic() - self._since >= self.policy.interval
        )

    def take(self) -> list[JSON]:
        """The kept deltas, now no longer kept (`give_back` them if their write fails)."""
        kept, self._kept, self._chars = self._kept, [], 0
        return kept

    def give_back(self, kept: list[JSON]) -> None:
        """Keep again, before any kept since, deltas whose write failed: a retried write
        carries them, and nothing the stream received is lost."""
        if not kept:
            return
        later, self._kept = self._kept, []
        join_into(self._kept, kept)
        join_into(self._kept, later)
        self._chars = delta_chars(self._kept)
        self._since = self._since or time.monotonic()


@type_faults
class ReplyStream:
    """One streaming reply: `add` deltas, then `finish` or `abandon`. As a context manager
    it finishes the reply when the block ends, and abandons it (keeping what arrived) when
    the block raises."""

    def __init__(
        self, ops: StreamOps | Any, context_id: UUID | str, written: Written,
        policy: StreamPolicy | None = None, extra: dict[str, Any] | None = None,
    ) -> None:  # fmt: skip
        self._ops = ops
        self._extra = extra or {}  # passed to every operation (the store's actor)
        self.context_id = context_id
        self.id = written.ids[0]
        self.written = written  # what the latest write answered
        self.policy = policy or StreamPolicy()
        self._kept = KeptDeltas(self.policy)
        self._lock = threading.Lock()
        self.closed = False
        self.writes = 1  # the begin

    @classmethod
    def begin(
        cls, ops: StreamOps | Any, context_id: UUID | str, message: Any = None, *,
        after: MessageRef | None = None, format: str | None = None,
        policy: StreamPolicy | None = None, extra: dict[str, Any] | None = None,
    ) -> ReplyStream:  # fmt: skip
        written = ops.begin(context_id, opening_message(message, format), after=after,
                            format=format, **(extra or {}))  # fmt: skip
        return cls(ops, context_id, written, policy, extra)

    def add(self, *deltas: Any) -> Written | None:
        """Take deltas (neutral, or a provider's stream events); writes the kept ones when
        the policy says so, and returns what that write answered (else None)."""
        with self._lock:
            self._check_open()
            return self._write_kept() if self._kept.keep(deltas) else None

    def keep(self, *deltas: Any) -> bool:
        """Take deltas without writing; whether a write is due (then call `flush`, e.g. off
        an event loop)."""
        with self._lock:
            self._check_open()
            return self._kept.keep(deltas)

    def flush(self) -> Written | None:
        """Write the kept deltas now (None when none are kept)."""
        with self._lock:
            self._check_open()
            return self._write_kept()

    def finish(self, message: Any = None) -> Written:
        """Complete the reply, with the kept deltas, in one write (or as `message`). A
        failed finish keeps the stream open and its deltas kept: retry it, or abandon."""
        with self._lock:
            self._check_open()
            kept = self._kept.take()
            try:
                self.written = self._ops.finish(
                    self.context_id, self.id, message, deltas=kept or None, **self._extra
                )
            except BaseException:
                self._kept.give_back(kept)
                raise
            self.closed, self.writes = True, self.writes + 1
            return self.written

    def abandon(self, reason: str | None = None, *, keep: bool = True) -> Written:
        """Stop the reply for good, with the kept deltas: kept as it stands (marked
        abandoned), or hidden with `keep=False`. A failed abandon keeps the stream open."""
        with self._lock:
            self._check_open()
            kept = self._kept.take()
            try:
                self.written = self._ops.abandon(
                    self.context_id, self.id, reason=reason, keep=keep, deltas=kept or None,
                    **self._extra,
                )  # fmt: skip
            except BaseException:
                self._kept.give_back(kept)
                raise
            self.closed, self.writes = True, self.writes + 1
            return self.written

    def _write_kept(self) -> Written | None:
        kept = self._kept.take()
        if not kept:
            return None
        try:
            self.written = self._ops.append(self.context_id, self.id, kept, **self._extra)
        except BaseException:
            self._kept.give_back(kept)
            raise
        self.writes += 1
        return self.written

    def _check_open(self) -> None:
        if self.closed:
            raise InvalidOperationError(f"the stream of message {self.id!r} is closed")

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.closed:
            return
        if exc is None:
            self.finish()
        else:
            self.abandon(reason=f"{type(exc).__name__}: {exc}"[:1000])


__all__ = ["KeptDeltas", "ReplyStream", "StreamOps", "StreamPolicy", "opening_message"]
