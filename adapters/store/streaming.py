"""The facade's streamed replies: begin, append, finish, abandon (domain/streaming.py),
`stream()`, the handle that batches deltas into few events (adapters/store/reply_stream.py),
and the live tail: `follow()` (adapters/store/tail.py). A part of ContextStore, which
offers its methods as its own."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any
from uuid import UUID

from ctxstore.adapters.store import tail
from ctxstore.adapters.store.commands import Commands
from ctxstore.adapters.store.core import StoreCore
from ctxstore.adapters.store.reply_stream import (
    ReplyStream,
    StreamOps,
    StreamPolicy,
    opening_message,
)
from ctxstore.adapters.store.results import TailEvent, Written
from ctxstore.adapters.store.writer import Writer
from ctxstore.domain.context import JSON, MessageRef
from ctxstore.domain.messages import Message


class StreamingSurface:
    """What ContextStore offers for a reply that is stored while it streams."""

    def __init__(
        self, core: StoreCore, writer: Writer, commands: Commands,
        compacting: Callable[[Written, str | None], Written], store: StreamOps,
    ) -> None:  # fmt: skip
        self._core = core
        self._writer = writer
        self._commands = commands
        self._compacting = compacting  # the store's proactive compaction after a write
        self._store = store  # what a stream's handle writes through (faults typed)

    def begin(
        self, context_id: UUID | str, message: Message | JSON | None = None, *,
        after: MessageRef | None = None, format: str | None = None, actor: str | None = None,
        expected_version: int | None = None,
    ) -> Written:  # fmt: skip
        """Start an assistant reply that is stored as it streams: `message` is how it starts
        in its own shape (default: an empty assistant message of `format`; a Responses
        stream starts each output item from its `response.output_item.added`). Visible at
        once, marked incomplete (metadata `ctxstore_incomplete`); `Written.ids[0]` is its id."""
        cid, command = self._commands.begin(
            context_id, opening_message(message, format), after=after, format=format,
            actor=actor,
        )  # fmt: skip
        return self._writer.command(cid, expected_version, command)

    def append(
        self, context_id: UUID | str, message_id: MessageRef, deltas: Any, *,
        actor: str | None = None, expected_version: int | None = None,
    ) -> Written:  # fmt: skip
        """Add deltas to a streaming reply: neutral deltas or a provider's stream events
        (domain/streaming.py), as one event. `stream()` batches them for you."""
        cid, command = self._commands.append(context_id, message_id, deltas, actor=actor)
        return self._writer.command(cid, expected_version, command)

    def finish(
        self, context_id: UUID | str, message_id: MessageRef,
        message: Message | JSON | None = None, *, deltas: Any = None,
        actor: str | None = None, expected_version: int | None = None,
    ) -> Written:  # fmt: skip
        """Complete a streaming reply: as it streamed, after the last `deltas` (one write),
        or as `message` (the SDK's final object, under the same id)."""
        cid, command = self._commands.finish(
            context_id, message_id, message, deltas=deltas, actor=actor
        )
        return self._compacting(self._writer.command(cid, expected_version, command), actor)

    def abandon(
        self, context_id: UUID | str, message_id: MessageRef, *, reason: str | None = None,
        keep: bool = True, deltas: Any = None, actor: str | None = None,
        expected_version: int | None = None,
    ) -> Written:  # fmt: skip
        """Stop a streaming reply for good (the client went away, the user pressed stop):
        after the last `deltas`, kept as it stands and marked abandoned — prompts send it
        repaired (docs/how-to/streaming.md) — or hidden with `keep=False`."""
        cid, command = self._commands.abandon(
            context_id, message_id, reason=reason, keep=keep, deltas=deltas, actor=actor
        )
        return self._writer.command(cid, expected_version, command)

    def stream(
        self, context_id: UUID | str, message: Message | JSON | None = None, *,
        after: MessageRef | None = None, format: str | None = None,
        policy: StreamPolicy | None = None, actor: str | None = None,
    ) -> ReplyStream:  # fmt: skip
        """Begin a reply and return the handle that takes its deltas and stores them in
        batches (`policy`), then finishes it, or abandons it when the block it opens
        raises."""
        return ReplyStream.begin(
            self._store, context_id, message, after=after, format=format, policy=policy,
            extra={"actor": self._core.actor(actor)},
        )  # fmt: skip

    # ---- the live tail ----------------------------------------------------------------

    def follow(
        self, context_id: UUID | str, *, after: int | None = None, idle: float | None = None
    ) -> Iterator[TailEvent]:
        """The context's events after version `after` (default: its head, so only new
        ones) as they are written, by this process or any other; ends after `idle` seconds
        without one (if given), and raises ContextNotFoundError when it is erased."""
        return tail.follow(self._core, self._core.id(context_id), after, idle=idle)
