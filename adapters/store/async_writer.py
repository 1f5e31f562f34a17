"""The async store's writer: the sync writer's path, with its waits awaited.

A command runs as the sync writer runs it (adapters/store/writer.py) — on the cached
aggregate, its events sealed with their chain links — on the event loop, where it is CPU
work only; the one wait, the insert, is awaited (storage/async_events.py). What needs the
database beside it and is rare — loading a context that is not cached, the chain head of a
context written elsewhere, telling whether a lost reply's write landed, a snapshot, a
context whose writers take turns — runs on the store's worker thread. Same events, same
refusals, same retries as the sync writer.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar
from uuid import UUID

from ctxstore.adapters.storage.async_events import AsyncEvents
from ctxstore.adapters.storage.backend import driver_errors
from ctxstore.adapters.storage.events import DAMAGE, damaged
from ctxstore.adapters.store.cache import Held
from ctxstore.adapters.store.core import StoreCore
from ctxstore.adapters.store.results import Written
from ctxstore.adapters.store.write_attempt import (
    Next,
    StoredBy,
    drive_async,
    new_command_id,
    settle,
)
from ctxstore.adapters.store.writer import MAX_ATTEMPTS, Command, Writer, written_of
from ctxstore.domain.context import Context
from ctxstore.domain.errors import CtxStoreError, VersionConflictError
from ctxstore.domain.limits import check_int

T = TypeVar("T")
log = logging.getLogger(__name__)
Offload = Callable[..., Awaitable[Any]]


class AsyncWriter:
    """Turns commands into stored events for the async store."""

    def __init__(self, core: StoreCore, writer: Writer, events: AsyncEvents, offload: Offload):
        self.core = core
        self.writer = writer  # the sync writer: its rare paths, on the worker thread
        self.events = events
        self.offload = offload

    async def command(
        self, context_id: Any, expected_version: int | None, command: Command
    ) -> Written:
        cid = self.core.id(context_id)
        if expected_version is not None:
            check_int(expected_version, "expected_version")
        turns = self.core.storage.turns
        command_id = new_command_id()
        for attempt in range(MAX_ATTEMPTS):
            if turns.wanted(cid, attempt, False):
                # Writers take turns on this context: the sync writer's path (it waits).
                result: Written = await self.offload(
                    self.writer.command, cid, expected_version, command
                )
                return result
            if attempt:
                await asyncio.sleep(random.uniform(0, min(0.05, 0.0005 * 2**attempt)))
            held = self.core.cache.held(cid)
            async with Unblocked(held):
                done = await self._attempt(cid, held, expected_version, command, command_id)
            if done is not None:
                return done
        raise VersionConflictError(f"context {cid}: gave up after {MAX_ATTEMPTS} racing writes")

    async def _attempt(
        self, cid: UUID, held: Held, expected: int | None, command: Command, command_id: str
    ) -> Written | None:
        """One try; None when it lost a race and the command should run again."""
        fresh = held.ctx is None
        await self.ready(cid)
        if held.ctx is None:
            held.ctx, held.erasures = await self.offload(self.core.read_counted, cid)
        ctx = held.ctx
        assert ctx is not None
        if not self.core.tokenizers.loaded(ctx.encoding):  # (building one takes ~0.3 s)
            await self.offload(self.core.tokenizers.counter, ctx.encoding)
        if expected is not None and not ctx.at_content_version(expected) and not fresh:
            ctx, fresh = await self.fresh(cid, held), True
        if expected is not None and not ctx.at_content_version(expected):
            raise VersionConflictError(f"context {cid} is at version {ctx.version}, not {expected}")
        before = ctx.version
        try:
            self.core.retention.check(ctx)  # an expired context takes no writes
            touched = command(ctx)
        except CtxStoreError:
            held.stale()
            if fresh:
                raise
            return None  # the refusal may come from a stale cache: judge on fresh state
        except BaseException:
            held.stale()
            raise
        events = ctx.collect_events()
        try:
            await self._put(held, cid, before, events, command_id)
        except driver_errors() as exc:
            held.stale()

            async def stored_by(q: StoredBy) -> bool:
                found: bool = await self.offload(self.writer.stored_by, cid, command_id, q)
                return found

            after = await drive_async(settle(cid, before, exc), stored_by)
            if after is Next.TAKE_TURN:
                self.core.storage.turns.saw_others(cid)
                return None
            if after is Next.RETRY:
                return None
            held.ctx = ctx  # the insert landed; its reply was lost
        except BaseException:
            held.stale()
            raise
        # Past the commit point: the command is stored, whatever happens to the snapshot.
        if self.writer.snapshot_due(ctx, before):
            try:
                await self.offload(self.writer.maybe_snapshot, ctx, before)
            except Exception:
                log.warning("context %s: stored; its snapshot failed", cid, exc_info=True)
        return written_of(cid, ctx, touched)

    async def ready(self, cid: UUID, *, create: bool = False) -> None:
        """What reading or writing a context needs beside its rows, fetched on a worker
        thread when not at hand: its data keys (`create`: made if it has none), the
        retention policies."""
        keys = self.core.storage.keys
        if keys is not None and not keys.keys.known(cid.hex):
            fetch = keys.keys.current if create else keys.keys.generations
            await self.offload(fetch, cid.hex)
        if self.core.retention.stale():
            await self.offload(self.core.retention.policies)

    async def fresh(self, cid: UUID, held: Held) -> Context:
        """The cached aggregate caught up with what others stored (a fresh load when none
        is cached: on a worker thread), as core.fresh is for the sync store. Callers hold
        the context's lock."""
        await self.ready(cid)
        ctx: Context
        if held.ctx is None:
            ctx, held.erasures = await self.offload(self.core.read_counted, cid)
            held.ctx = ctx
            self.core.retention.check(ctx)
            return ctx
        ctx = held.ctx
        try:
            stored, erasures = await self.events.select_after(cid, ctx.version)
            later = [self.core.storage.to_event(s) for s in stored]
            if not self.core.caught_up(ctx, held, later, erasures):
                ctx, held.erasures = await self.offload(self.core.read_counted, cid)
                held.ctx = ctx
        except CtxStoreError:
            raise
        except DAMAGE as exc:
            held.stale()
            raise damaged(cid, exc) from exc
        self.core.retention.check(ctx)  # on what is stored now
        return ctx

    async def _put(self, held: Held, cid: UUID, before: int, events: Any, command_id: str) -> None:
        if not events:
            return
        chain = held.chain
        head = (
            chain[1]
            if chain is not None and chain[0] == before
            else await self.offload(self.writer.chain_head, held, cid, before)
        )
        await self.ready(cid, create=True)
        stored, last = self.core.storage.mapper.to_sealed_events(events, head, command_id)
        if before == 0:  # a creation: appends after it hold while its erasures stay these
            held.erasures = await self.offload(self.core.storage.erasures_of, cid)
        await self.events.insert(cid, stored, held.erasures if before else None)
        held.chain = (before + len(stored), last)
        self.core.written.wrote(cid, before + len(stored))  # replicas: read your writes
        self.core.storage.notifications.publish(cid.hex)


class Unblocked:
    """A context's lock taken without blocking the event loop: while another thread holds
    it (for a moment: a sync command, a read), the loop sleeps."""

    def __init__(self, held: Held) -> None:
        self.held = held

    async def __aenter__(self) -> None:
        n = 0
        while not self.held.lock.acquire(blocking=False):
            n += 1
            await asyncio.sleep(0.0002 * min(n, 25))

    async def __aexit__(self, *exc: object) -> None:
        self.held.lock.release()
