"""Each command as a function of the aggregate, made once for both stores in process: what
is checked before any I/O (actor, attachments, sizes), then the function the writer runs
on the context (the sync facade's writer, or the async store's). Every surface so refuses
and writes the same."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from ctxstore.adapters.store.attachments import Attachments
from ctxstore.adapters.store.captured import planned_call
from ctxstore.adapters.store.core import StoreCore
from ctxstore.adapters.store.writer import Command
from ctxstore.domain.compaction import summary_message
from ctxstore.domain.context import JSON, Context, MessageRef
from ctxstore.domain.errors import InvalidOperationError
from ctxstore.domain.json_values import json_size_bound
from ctxstore.domain.limits import check_message_sizes
from ctxstore.domain.message_input import is_one_message
from ctxstore.domain.messages import Message
from ctxstore.domain.streaming import apply_deltas, neutral_deltas
from ctxstore.domain.summaries import covered_entries
from ctxstore.domain.tokens import TextCounter

Planned = tuple[UUID, Command]


class Commands:
    """The commands of one store."""

    def __init__(self, core: StoreCore, attachments: Attachments) -> None:
        self.core = core
        self.attachments = attachments

    def insert(
        self, context_id: UUID | str, messages: Any, *, after: MessageRef | None,
        actor: str | None, format: str | None, calls: Sequence[Any] | None = None,
    ) -> Planned:  # fmt: skip
        who, cid = self.core.actor(actor), self.core.id(context_id)
        messages = self.attachments.lifted(cid, messages)
        batch: Any = [messages] if is_one_message(messages) else messages
        if isinstance(batch, list | tuple):
            check_message_sizes(batch, self.core.settings.max_message_bytes)
        if calls is not None and (isinstance(calls, str | bytes | dict) or
                                  not isinstance(calls, Sequence)):  # fmt: skip
            raise InvalidOperationError("calls: give a list of captured calls")
        steps = [planned_call(self.core, call, actor=who) for call in calls or ()]
        size = len(batch) if isinstance(batch, list | tuple) else 1
        # A call's reply inserted with it: the messages before the reply are one event and
        # the call is made with the context at its version (no copy of what was sent).
        cuts = sorted({r for r, _ in steps if r is not None and 0 < r < size})

        def command(c: Context) -> list[str]:
            self.core.check_count(c, size)
            counter = self.core.counter(c)
            pieces = [batch] if not cuts else [
                batch[a:b] for a, b in zip([0, *cuts], [*cuts, size], strict=True)
            ]  # fmt: skip
            at: dict[int, tuple[int, int, bool]] = {}  # a piece's start -> version, tokens
            ids: list[str] = []
            start, where = 0, after
            for piece in pieces:
                at[start] = (c.version, c.tokens, c.estimated > 0)
                done = c.insert(piece, after=where, actor=who, counter=counter, format=format)
                ids += done
                start += len(piece) if isinstance(piece, list | tuple) else 1
                where = done[-1] if where is not None and done else where
            for reply_at, step in steps:  # the calls whose replies these are
                version, tokens, estimated = at.get(reply_at or 0, at[0])
                step(c, version, (tokens, estimated))
            return ids

        return cid, command

    def delete(
        self, context_id: UUID | str, ids: MessageRef | Sequence[MessageRef], *,
        actor: str | None,
    ) -> Planned:  # fmt: skip
        who = self.core.actor(actor)
        return self.core.id(context_id), lambda c: c.delete(ids, actor=who)

    def replace(
        self, context_id: UUID | str, message_id: MessageRef, message: Message | JSON | str, *,
        actor: str | None,
    ) -> Planned:  # fmt: skip
        who, cid = self.core.actor(actor), self.core.id(context_id)
        if not isinstance(message, str):
            message = self.attachments.lifted(cid, message)
            check_message_sizes([message], self.core.settings.max_message_bytes)
        made = message
        return cid, lambda c: c.replace(message_id, made, actor=who, counter=self.core.counter(c))

    def compress(
        self, context_id: UUID | str, ids: MessageRef | Sequence[MessageRef],
        summary: Message | JSON | str, *, stats: JSON | None, actor: str | None,
    ) -> Planned:  # fmt: skip
        who, cid = self.core.actor(actor), self.core.id(context_id)
        if isinstance(summary, str):
            summary = summary_message(summary)
        made: Message | JSON = self.attachments.lifted(cid, summary)
        check_message_sizes([made], self.core.settings.max_message_bytes)
        return cid, lambda c: c.compress(
            ids, made, stats=stats, actor=who, counter=self.core.counter(c)
        )

    def expand(
        self, context_id: UUID | str, summary_id: MessageRef, *, actor: str | None
    ) -> Planned:
        who, cid = self.core.actor(actor), self.core.id(context_id)

        def command(c: Context) -> list[str]:
            found = c.resolve(summary_id)
            # Past states through context_at: a bounded history says which are removed.
            covered = covered_entries(cid, c, found, self.core.context_at)
            self.core.check_count(c, len(covered) - 1)
            return c.expand(found, covered, actor=who)

        return cid, command

    def batch_start(self, context_id: UUID | str, *, actor: str | None) -> Planned:
        who = self.core.actor(actor)
        return self.core.id(context_id), lambda c: c.batch_start(actor=who)

    def batch_end(
        self, context_id: UUID | str, to: int | None, *, keep: bool, actor: str | None
    ) -> Planned:
        who = self.core.actor(actor)
        return self.core.id(context_id), lambda c: c.batch_end(to=to, keep=keep, actor=who)

    # ---- streamed replies -------------------------------------------------------------

    def begin(
        self, context_id: UUID | str, start: Any, *, after: MessageRef | None,
        format: str | None, actor: str | None,
    ) -> Planned:  # fmt: skip
        who, cid = self.core.actor(actor), self.core.id(context_id)
        start = self.attachments.lifted(cid, start)
        check_message_sizes([start], self.core.settings.max_message_bytes)
        return cid, lambda c: c.begin(
            start, after=after, actor=who, counter=self.core.counter(c), format=format
        )

    def append(
        self, context_id: UUID | str, message_id: MessageRef, deltas: Any, *,
        actor: str | None,
    ) -> Planned:  # fmt: skip
        who, found = self.core.actor(actor), neutral_deltas(deltas)

        def command(c: Context) -> str:
            self._check_growth(c, message_id, found)
            return c.append(message_id, found, actor=who, counter=self.core.counter(c))

        return self.core.id(context_id), command

    def finish(
        self, context_id: UUID | str, message_id: MessageRef, message: Any, *, deltas: Any,
        actor: str | None,
    ) -> Planned:  # fmt: skip
        who, cid = self.core.actor(actor), self.core.id(context_id)
        found = [] if deltas is None else neutral_deltas(deltas)
        final: Message | JSON | None = None
        if message is not None:
            final = self.attachments.lifted(cid, message)
            check_message_sizes([final], self.core.settings.max_message_bytes)

        def command(c: Context) -> str:
            # The last deltas and the finish count the same text: count it once.
            counter = _Remembering(self.core.counter(c))
            if found:
                self._check_growth(c, message_id, found)
                c.append(message_id, found, actor=who, counter=counter)
            return c.finish(message_id, final, actor=who, counter=counter)

        return cid, command

    def abandon(
        self, context_id: UUID | str, message_id: MessageRef, *, reason: str | None,
        keep: bool, deltas: Any, actor: str | None,
    ) -> Planned:  # fmt: skip
        who = self.core.actor(actor)
        found = [] if deltas is None else neutral_deltas(deltas)

        def command(c: Context) -> str:
            if found:
                self._check_growth(c, message_id, found)
                c.append(message_id, found, actor=who, counter=self.core.counter(c))
            return c.abandon(message_id, reason=reason, keep=keep, actor=who)

        return self.core.id(context_id), command

    def _check_growth(self, c: Context, ref: MessageRef, deltas: list[JSON]) -> None:
        """Refuse deltas that would make the message larger than CTXSTORE_MAX_MESSAGE_BYTES."""
        limit = self.core.settings.max_message_bytes
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
