"""AsyncContextStore: the store for asyncio callers (`await ctxstore.aopen(url)`).

Every operation of the contract, awaited. The commands (insert, delete, replace, compress,
batches, and a streamed reply's steps) and the head reads (`visible`,
`visible_messages`, `follow`) run on the event loop: their checks, the aggregate and the
sealing are CPU work there, and their one wait on the database is awaited
(adapters/storage/async_events.py: psycopg's async connections on PostgreSQL; on SQLite
statements that never wait for another writer). Nothing hops to a thread on that path.
What is rare or bulky — opening the store, a context not yet cached, a snapshot, audits,
exports, erasure, compaction, expanding a summary — runs on the store's worker threads,
awaited (which is each operation's `on_loop` in adapters/store/spec.py). The commands
are made by the same code as the sync store's (adapters/store/commands.py) and the writer
follows the same path (adapters/store/async_writer.py): the same events, refusals and
retries; tests/integration/test_async_store.py runs one contract suite against both.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any, Self, TypeVar
from uuid import UUID

from ctxstore.adapters.capture.spans import traced
from ctxstore.adapters.settings import Settings
from ctxstore.adapters.storage.async_events import AsyncEvents
from ctxstore.adapters.store import compaction, tail
from ctxstore.adapters.store.async_offloaded import AsyncOffloaded
from ctxstore.adapters.store.async_reply_stream import AsyncReplyStream
from ctxstore.adapters.store.async_writer import AsyncWriter, Unblocked
from ctxstore.adapters.store.attachments import lifts_any
from ctxstore.adapters.store.commands import Planned
from ctxstore.adapters.store.contract_async import AsyncContextOperations
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.adapters.store.faults import type_faults
from ctxstore.adapters.store.parts import parts_of
from ctxstore.adapters.store.reply_stream import StreamPolicy, opening_message
from ctxstore.adapters.store.results import (
    TailEvent,
    VisibleContext,
    Written,
)
from ctxstore.domain.blobs import has_references
from ctxstore.domain.context import JSON, MessageRef
from ctxstore.domain.errors import ContextNotFoundError
from ctxstore.domain.json_values import json_copy
from ctxstore.projections.history import tail_event
from ctxstore.projections.visible import visible_of

T = TypeVar("T")


@traced("insert", "delete")  # spans, when a tracer provider is configured
@type_faults
class AsyncContextStore(AsyncOffloaded, AsyncContextOperations):
    """Stores contexts as event streams, for asyncio callers; see the module."""

    def __init__(self, store: ContextStore, events: AsyncEvents, threads: int = 4) -> None:
        self._store = store
        self._parts = parts = parts_of(store)
        self._core = parts.core
        self._commands = parts.commands
        self._events = events
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="ctxstore-async")
        self._writer = AsyncWriter(self._core, parts.writer, events, self._offload)

    @classmethod
    async def open(
        cls, url: str | None = None, settings: Settings | None = None, *, migrate: bool = True,
        create: bool = True,
    ) -> AsyncContextStore:  # fmt: skip
        """Open the store at `url` (as ContextStore.from_url: the default SQLite file
        unless CTXSTORE_URL names another), off the event loop."""
        loop = asyncio.get_running_loop()
        store = await loop.run_in_executor(
            None, functools.partial(ContextStore.from_url, url, settings, migrate=migrate,
                                    create=create),
        )  # fmt: skip
        # The default encoding loaded now, off the loop (building one takes ~0.3 s).
        await loop.run_in_executor(None, store.tokenizers.counter, store.settings.encoding)
        return cls(store, parts_of(store).storage.async_events())

    @property
    def settings(self) -> Settings:
        return self._store.settings

    @property
    def sync(self) -> ContextStore:
        """The sync store over the same storage and cache (for code that is not async)."""
        return self._store

    async def _plan(
        self, build: Callable[..., Planned], payload: Any, *args: Any, **kwargs: Any
    ) -> Planned:
        """A command made on the loop; on a worker thread when its messages hold
        attachments (storing their bytes is I/O)."""
        if lifts_any(payload):
            return await self._offload(build, *args, **kwargs)
        return build(*args, **kwargs)

    # ---- contexts ----------------------------------------------------------------------

    # ---- commands: on the loop ---------------------------------------------------------

    async def insert(
        self, context_id: UUID | str, messages: Any, *, after: MessageRef | None = None,
        actor: str | None = None, expected_version: int | None = None,
        format: str | None = None, calls: Sequence[Any] | None = None,
    ) -> Written:  # fmt: skip
        cid, command = await self._plan(
            self._commands.insert, messages, context_id, messages, after=after,
            actor=actor, format=format, calls=calls,
        )  # fmt: skip
        return await self._compacting(
            await self._writer.command(cid, expected_version, command), actor
        )

    async def delete(
        self, context_id: UUID | str, ids: MessageRef | Sequence[MessageRef], *,
        actor: str | None = None, expected_version: int | None = None,
    ) -> Written:  # fmt: skip
        cid, command = self._commands.delete(context_id, ids, actor=actor)
        return await self._writer.command(cid, expected_version, command)

    async def replace(
        self, context_id: UUID | str, message_id: MessageRef, message: Any, *,
        actor: str | None = None, expected_version: int | None = None,
    ) -> Written:  # fmt: skip
        cid, command = await self._plan(
            self._commands.replace, message, context_id, message_id, message, actor=actor
        )
        return await self._writer.command(cid, expected_version, command)

    async def compress(
        self, context_id: UUID | str, ids: MessageRef | Sequence[MessageRef], summary: Any, *,
        stats: JSON | None = None, actor: str | None = None,
        expected_version: int | None = None,
    ) -> Written:  # fmt: skip
        cid, command = await self._plan(
            self._commands.compress, summary, context_id, ids, summary, stats=stats,
            actor=actor,
        )  # fmt: skip
        return await self._writer.command(cid, expected_version, command)

    async def batch_start(
        self, context_id: UUID | str, *, actor: str | None = None,
        expected_version: int | None = None,
    ) -> Written:  # fmt: skip
        cid, command = self._commands.batch_start(context_id, actor=actor)
        return await self._writer.command(cid, expected_version, command)

    async def batch_end(
        self, context_id: UUID | str, to: int | None = None, *, keep: bool = False,
        actor: str | None = None, expected_version: int | None = None,
    ) -> Written:  # fmt: skip
        cid, command = self._commands.batch_end(context_id, to, keep=keep, actor=actor)
        return await self._writer.command(cid, expected_version, command)

    async def begin(
        self, context_id: UUID | str, message: Any = None, *, after: MessageRef | None = None,
        format: str | None = None, actor: str | None = None,
        expected_version: int | None = None,
    ) -> Written:  # fmt: skip
        start = opening_message(message, format)
        cid, command = await self._plan(
            self._commands.begin, start, context_id, start, after=after, format=format,
            actor=actor,
        )  # fmt: skip
        return await self._writer.command(cid, expected_version, command)

    async def append(
        self, context_id: UUID | str, message_id: MessageRef, deltas: Any, *,
        actor: str | None = None, expected_version: int | None = None,
    ) -> Written:  # fmt: skip
        cid, command = self._commands.append(context_id, message_id, deltas, actor=actor)
        return await self._writer.command(cid, expected_version, command)

    async def finish(
        self, context_id: UUID | str, message_id: MessageRef, message: Any = None, *,
        deltas: Any = None, actor: str | None = None, expected_version: int | None = None,
    ) -> Written:  # fmt: skip
        cid, command = await self._plan(
            self._commands.finish, message, context_id, message_id, message,
            deltas=deltas, actor=actor,
        )  # fmt: skip
        return await self._compacting(
            await self._writer.command(cid, expected_version, command), actor
        )

    async def abandon(
        self, context_id: UUID | str, message_id: MessageRef, *, reason: str | None = None,
        keep: bool = True, deltas: Any = None, actor: str | None = None,
        expected_version: int | None = None,
    ) -> Written:  # fmt: skip
        cid, command = self._commands.abandon(
            context_id, message_id, reason=reason, keep=keep, deltas=deltas, actor=actor
        )
        return await self._writer.command(cid, expected_version, command)

    async def stream(
        self, context_id: UUID | str, message: Any = None, *, after: MessageRef | None = None,
        format: str | None = None, policy: StreamPolicy | None = None,
        actor: str | None = None,
    ) -> AsyncReplyStream:  # fmt: skip
        """Begin a reply; the handle batches its deltas as the sync one does."""
        written = await self.begin(context_id, message, after=after, format=format, actor=actor)
        return AsyncReplyStream(self, context_id, written, policy, actor)

    async def _compacting(self, written: Written, actor: str | None) -> Written:
        """After an insert or a finish: compact proactively when a threshold is crossed (on
        a worker thread: the summarizer may call a model)."""
        core = self._core
        if core.settings.compaction.auto and compaction.crossed(
            core, written.tokens, written.messages
        ):
            await self._offload(
                compaction.compact_after_write, core, self._parts.writer,
                written.context_id, core.actor(actor),
            )  # fmt: skip
        return written

    # ---- reads ---------------------------------------------------------------------------

    async def visible(
        self, context_id: UUID | str, *, at_version: int | None = None,
        at_time: datetime | None = None, inline: bool = False, files: str | None = None,
    ) -> VisibleContext:  # fmt: skip
        """The visible context; the head on the loop, a past version or attachments' data
        on a worker thread."""
        if at_version is not None or at_time is not None or inline or files is not None:
            return await self._offload(
                self._store.visible, context_id, at_version=at_version, at_time=at_time,
                inline=inline, files=files,
            )  # fmt: skip
        cid = self._core.id(context_id)
        held = self._core.cache.held(cid)
        async with Unblocked(held):
            ctx = await self._writer.fresh(cid, held)
            return visible_of(ctx, [i.message for i in self._core.prompt_items(ctx, held)])

    async def visible_messages(
        self, context_id: UUID | str, *, last: int | None = None, inline: bool = False
    ) -> list[JSON]:
        """The visible messages as stored JSON (copies), or only the newest `last`."""
        cid = self._core.id(context_id)
        held = self._core.cache.held(cid)
        async with Unblocked(held):
            ctx = await self._writer.fresh(cid, held)
            order = ctx.order if last is None else ctx.order[-last:] if last > 0 else []
            found = [json_copy(ctx.stored_message(i)) for i in order]
        if inline and any(has_references(m) for m in found):  # their data: read on a thread
            return await self._offload(
                self._store.hooks.visible_messages, context_id, last=last, inline=True
            )
        return found

    async def follow(
        self, context_id: UUID | str, *, after: int | None = None, idle: float | None = None
    ) -> AsyncIterator[TailEvent]:
        """The context's events after `after` (default: only new ones) as they are written;
        ends after `idle` seconds without one (if given), raises ContextNotFoundError when
        it is erased."""
        cid = self._core.id(context_id)
        loop = asyncio.get_running_loop()
        woken = asyncio.Event()

        def wake(hex_id: str | None) -> None:
            if hex_id is None or hex_id == cid.hex:
                loop.call_soon_threadsafe(woken.set)

        unsubscribe = self._core.storage.notifications.subscribe(wake, cid.hex)
        try:
            at = (
                after
                if after is not None
                else await self._offload(tail.head_version, self._core, cid)
            )
            while True:
                woken.clear()
                await self._writer.ready(cid)
                found = await self._events.select(cid, at)
                if not found and not await self._offload(self._core.exists, cid):
                    raise ContextNotFoundError(f"no context with id {cid}")
                for stored in found:
                    event = self._core.storage.to_event(stored)
                    yield tail_event(event)
                    at = event.originator_version
                try:
                    await asyncio.wait_for(woken.wait(), idle if idle is not None else 5.0)
                except TimeoutError:
                    if idle is not None:
                        return
        finally:
            unsubscribe()

    async def close(self) -> None:
        await self._events.close()
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, functools.partial(self._pool.shutdown, wait=True))
        await loop.run_in_executor(None, self._store.close)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


__all__ = ["AsyncContextStore", "AsyncReplyStream"]
