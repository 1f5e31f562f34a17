"""The facade's streamed replies: begin, append, finish, abandon (domain/streaming.py),
`stream()`, the handle that batches deltas into few events (adapters/store/reply_stream.py),
and the live tail: `follow()` and what the HTTP service's event streams read
(adapters/store/tail.py). ContextStore inherits it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any
from uuid import UUID

from ctxstore.adapters.storage.notifications import Wake
from ctxstore.adapters.store import compaction, tail
from ctxstore.adapters.store.attachments import Attachments
from ctxstore.adapters.store.core import StoreCore
from ctxstore.adapters.store.faults import type_faults
from ctxstore.adapters.store.reply_stream import ReplyStream, StreamPolicy, opening_message
from ctxstore.adapters.store.results import TailEvent, Written
from ctxstore.adapters.store.writer import Writer
from ctxstore.domain.context import JSON, Context, MessageRef
from ctxstore.domain.limits import check_message_sizes
from ctxstore.domain.messages import Message, json_size_bound
from ctxstore.domain.streaming import apply_deltas, neutral_deltas
from ctxstore.domain.tokens import TextCounter


@type_faults
class StreamingSurface:
    """What ContextStore offers for a reply that is stored while it streams."""

    _core: StoreCore
    _writer: Writer
    _attachments: Attachments

    def begin(
        self, context_id: UUID | str, message: Message | JSON | None = None, *,
        after: MessageRef | None = None, format: str | None = None, actor: str | None = None,
        expected_version: int | None = None,
    ) -> Written:  # fmt: skip
        """Start an assistant reply that is stored as it streams: `message` is how it starts
        in its own shape (default: an empty assistant message of `format`; a Responses
        stream starts each output item from its `response.output_item.added`). Visible at
        once, marked incomplete (metadata `ctxstore_incomplete`); `Written.ids[0]` is its id."""
        who = self._core.actor(actor)
        start = opening_message(message, format)
        start = self._attachments.lifted(self._core.id(context_id), start)
        check_message_sizes([start], self._core.settings.max_message_bytes)
        return self._writer.command(
            context_id, expected_version,
            lambda c: c.begin(start, after=after, actor=who, counter=self._core.counter(c),
                              format=format),
        )  # fmt: skip

    def append(
        self, context_id: UUID | str, message_id: MessageRef, deltas: Any, *,
        actor: str | None = None, expected_version: int | None = None,
    ) -> Written:  # fmt: skip
        """Add deltas to a streaming reply: neutral deltas or a provider's stream events
        (domain/streaming.py), as one event. `stream()` batches them for you."""
        who = self._core.actor(actor)
        found = neutral_deltas(deltas)

        def command(c: Context) -> str:
            self._check_growth(c, message_id, found)
            return c.append(message_id, found, actor=who, counter=self._core.counter(c))

        return self._writer.command(context_id, expected_version, command)

    def finish(
        self, context_id: UUID | str, message_id: MessageRef,
        message: Message | JSON | None = None, *, deltas: Any = None,
        actor: str | None = None, expected_version: int | None = None,
    ) -> Written:  # fmt: skip
        """Complete a streaming reply: as it streamed, after the last `deltas` (one write),
        or as `message` (the SDK's final object, under the same id)."""
        who = self._core.actor(actor)
        found = [] if deltas is None else neutral_deltas(deltas)
        final: Message | JSON | None = None
        if message is not None:
            final = self._attachments.lifted(self._core.id(context_id), message)
            check_message_sizes([final], self._core.settings.max_message_bytes)

        def command(c: Context) -> str:
            # The last deltas and the finish count the same text: count it once.
            counter = _Remembering(self._core.counter(c))
            if found:
                self._check_growth(c, message_id, found)
                c.append(message_id, found, actor=who, counter=counter)
            return c.finish(message_id, final, actor=who, counter=counter)

        written = self._writer.command(context_id, expected_version, command)
        if self._core.settings.compaction.auto and compaction.crossed(
            self._core, written.tokens, written.messages
        ):
            compaction.compact_proactively(self._core, self._writer, written.context_id, who)
        return written

    def abandon(
        self, context_id: UUID | str, message_id: MessageRef, *, reason: str | None = None,
        keep: bool = True, deltas: Any = None, actor: str | None = None,
        expected_version: int | None = None,
    ) -> Written:  # fmt: skip
        """Stop a streaming reply for good (the client went away, the user pressed stop):
        after the last `deltas`, kept as it stands and marked abandoned — prompts send it
        repaired (docs/streaming.md) — or hidden with `keep=False`."""
        who = self._core.actor(actor)
        found = [] if deltas is None else neutral_deltas(deltas)

        def command(c: Context) -> str:
            if found:
                self._check_growth(c, message_id, found)
                c.append(message_id, found, actor=who, counter=self._core.counter(c))
            return c.abandon(message_id, reason=reason, keep=keep, actor=who)

        return self._writer.command(context_id, expected_version, command)

    def stream(
        self, context_id: UUID | str, message: Message | JSON | None = None, *,
        after: MessageRef | None = None, format: str | None = None,
        policy: StreamPolicy | None = None, actor: str | None = None,
    ) -> ReplyStream:  # fmt: skip
        """Begin a reply and return the handle that takes its deltas and stores them in
        batches (`policy`), then finishes it, or abandons it when the block it opens
        raises."""
        return ReplyStream.begin(
            self, context_id, message, after=after, format=format, policy=policy,
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

    def events_after(self, context_id: UUID | str, after: int) -> list[TailEvent]:
        """One page of the context's stored events after version `after`."""
        return tail.events_after(self._core, self._core.id(context_id), after)

    def tail_head(self, context_id: UUID | str) -> int:
        """The context's newest version (where a follower starts by default)."""
        return tail.head_version(self._core, self._core.id(context_id))

    def watch(self, wake: Wake) -> Callable[[], None]:
        """Call `wake(context hex or None)` whenever events are stored (by any process the
        backend can see) until the returned function is called; `wake` must be quick."""
        return self._core.storage.notifications.subscribe(wake)

    def _check_growth(self, c: Context, ref: MessageRef, deltas: list[JSON]) -> None:
        """Refuse deltas that would make the message larger than CTXSTORE_MAX_MESSAGE_BYTES."""
        limit = self._core.settings.max_message_bytes
        current = c.stored_message(c.resolve(ref))
        bound = (json_size_bound(current) or limit + 1) + (json_size_bound(deltas) or limit + 1)
        if bound > limit:
            check_message_sizes([apply_deltas(current, deltas)], limit)


class _Remembering:
    """A counter that remembers its last text's count (a finish after its last deltas
    counts the whole reply twice: the second time is free)."""

    def __init__(self, counter: TextCounter) -> None:
        self._counter = counter
        self._last: tuple[str, int] | None = None

    @property
    def name(self) -> str:
        return self._counter.name

    @property
    def exact(self) -> bool:
        return self._counter.exact

    def count(self, text: str) -> int:
        if self._last is not None and self._last[0] == text:
            return self._last[1]
        n = self._counter.count(text)
        if len(text) > 256:
            self._last = (text, n)
        return n
