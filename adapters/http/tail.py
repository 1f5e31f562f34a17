"""The service's live tails: Server-Sent Events fed by the store's wake-ups.

Each client reads from the store what is new after its position when it is woken (the
store's notifications: this instance's writes, PostgreSQL's NOTIFY from every instance,
SQLite's watcher), so nothing is held per client but its position: a client never costs
memory for events it has not read. A client that stops reading is dropped once one send
has waited `send_timeout` seconds (its last event says why, if it can still be sent); at
most `max_clients` follow at once on one instance (503 beyond). A comment line every
`keepalive` seconds keeps proxies from closing an idle stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Self, TypeVar
from uuid import UUID

from fastapi.responses import StreamingResponse
from starlette.types import Send

from ctxstore.adapters.http.deps import Served, Target
from ctxstore.adapters.store.results import AuditPage
from ctxstore.adapters.store.shards.merged_audit import PREFIX as MERGED
from ctxstore.adapters.store.shards.merged_audit import MergedAuditPage, entry_cursors
from ctxstore.adapters.store.shards.store import ShardedStore
from ctxstore.adapters.store.tail import OUTAGE_WAIT, PAGE, Outage
from ctxstore.domain.errors import (
    ContextNotFoundError,
    InvalidOperationError,
    StoreUnavailableError,
    TooManyClientsError,
)

log = logging.getLogger(__name__)
T = TypeVar("T")


class TailHub:
    """The live tails of one service instance."""

    def __init__(
        self, *, max_clients: int = 1000, send_timeout: float = 10.0, keepalive: float = 15.0
    ) -> None:
        self.max_clients = max_clients
        self.send_timeout = send_timeout
        self.keepalive = keepalive
        self.clients = 0
        self.dropped = 0
        # Followers at one position of one context share one read, and its encoding.
        self._reads: dict[tuple[UUID, int], asyncio.Future[list[tuple[int, bytes]]]] = {}

    async def checked(self, ctx: Target) -> UUID:
        """The context the path names, checked to be the caller's (404 otherwise)."""
        return await asyncio.get_running_loop().run_in_executor(ctx.pool, lambda: ctx.cid)

    @staticmethod
    def resume_point(
        last_event_id: str | None, after: int | None, *, merged: bool = False
    ) -> int | str | None:
        """Where a tail starts: after Last-Event-ID, else `after`; `merged`: a service over
        shards, whose audit tail's ids are merged cursors."""
        if last_event_id is None or not last_event_id.strip():
            return after
        text = last_event_id.strip()
        if merged and text.startswith(MERGED) and len(text) <= 4000:
            return text
        if not text.isdigit() or len(text) > 18:
            raise InvalidOperationError(f"Last-Event-ID must be an event's id, got {text!r:.40}")
        return int(text)

    def admit(self) -> None:
        if self.clients >= self.max_clients:
            raise TooManyClientsError(
                f"this instance serves {self.max_clients} live tails already; retry later"
            )
        self.clients += 1

    def leave(self) -> None:
        self.clients -= 1

    async def context_events(
        self, store: Served, pool: ThreadPoolExecutor, cid: UUID, start: int | None
    ) -> AsyncIterator[bytes]:
        run = _runner(pool)
        woken = asyncio.Event()
        outage = Outage(f"context {cid}")
        with _woken_by(store, woken, cid.hex):
            at = start if start is not None else await run(store.hooks.tail_head, cid)
            yield b"retry: 1000\n\n"
            while True:
                woken.clear()
                try:
                    page = await self._page(run, store, cid, at)
                except ContextNotFoundError:
                    yield _event(None, "gone", '{"detail": "the context is erased"}')
                    return
                except StoreUnavailableError as exc:
                    # A restart or failover: the stream stays open and reads again.
                    outage.failed(exc)
                    yield b": the store does not answer; reading again\n\n"
                    await asyncio.sleep(OUTAGE_WAIT)
                    continue
                outage.over()
                for version, encoded in page:
                    yield encoded
                    at = version
                if len(page) < PAGE and not await _wait(woken, self.keepalive):
                    yield b": keep-alive\n\n"

    async def _page(
        self, run: Callable[..., Any], store: Served, cid: UUID, at: int
    ) -> list[tuple[int, bytes]]:
        """The context's events after `at`, encoded: read once for every follower that
        asks for the same page while it is being read."""
        key = (cid, at)
        shared = self._reads.get(key)
        if shared is None:

            async def read() -> list[tuple[int, bytes]]:
                page = await run(store.hooks.events_after, cid, at)
                return [(e.version, _event(e.version, e.type, e.model_dump_json())) for e in page]

            shared = asyncio.ensure_future(read())
            self._reads[key] = shared
            shared.add_done_callback(lambda _: self._reads.pop(key, None))
        # Shielded: a follower that goes away does not cancel the others' read.
        return await asyncio.shield(shared)

    async def tenant_events(
        self, store: Served, pool: ThreadPoolExecutor, tenant: str | None,
        start: int | str | None, types: list[str] | None, actor: str | None,
    ) -> AsyncIterator[bytes]:  # fmt: skip
        """The audit entries of a tenant's contexts as they are indexed, `id:` the cursor
        after each (a position; over shards, the merged cursor)."""
        run = _runner(pool)
        woken = asyncio.Event()

        def page_after(position: Any) -> AuditPage | MergedAuditPage:
            return store.audit(tenant=tenant, types=types, actor=actor, after=position, limit=PAGE)

        def ids(at: Any, page: AuditPage | MergedAuditPage) -> list[int | str]:
            if isinstance(page, MergedAuditPage) and isinstance(store, ShardedStore):
                return list(entry_cursors(at, page, store.names))
            return [e.position for e in page.entries]

        outage = Outage(f"the audit of {tenant or 'every tenant'}")
        with _woken_by(store, woken, None):
            at = start if start is not None else await run(store.admin.audit_head)
            page = await run(page_after, at)
            yield b"retry: 1000\n\n"
            while True:
                for event_id, entry in zip(ids(at, page), page.entries, strict=True):
                    yield _event(event_id, entry.type, entry.model_dump_json())
                at = page.cursor
                if not page.more and not await _wait(woken, self.keepalive):
                    yield b": keep-alive\n\n"
                woken.clear()
                while True:
                    try:
                        page = await run(page_after, at)
                        outage.over()
                        break
                    except StoreUnavailableError as exc:
                        outage.failed(exc)
                        yield b": the store does not answer; reading again\n\n"
                        await asyncio.sleep(OUTAGE_WAIT)


class EventStream(StreamingResponse):
    """text/event-stream whose every send must complete within the hub's send_timeout."""

    media_type = "text/event-stream"

    def __init__(self, hub: TailHub, body: AsyncIterator[bytes]) -> None:
        super().__init__(body, headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        self.hub = hub

    async def stream_response(self, send: Send) -> None:
        hub = self.hub
        hub.admit()
        try:
            await send({"type": "http.response.start", "status": self.status_code,
                        "headers": self.raw_headers})  # fmt: skip
            async for chunk in self.body_iterator:
                body = chunk.encode() if isinstance(chunk, str) else bytes(chunk)
                try:
                    await asyncio.wait_for(_body(send, body), hub.send_timeout)
                except TimeoutError:
                    hub.dropped += 1
                    reason = f"too slow: one send waited {hub.send_timeout:g} s"
                    log.warning("live tail client dropped (%s)", reason)
                    note = _event(None, "dropped", json.dumps({"detail": reason}))
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(_body(send, note), 1.0)
                    return  # unfinished: the server closes the connection
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            hub.leave()
            aclose = getattr(self.body_iterator, "aclose", None)
            if aclose is not None:
                await aclose()


def event_stream(hub: TailHub, body: AsyncIterator[bytes]) -> EventStream:
    hub.admit()  # refused before the response starts (503), then counted while it streams
    hub.leave()
    return EventStream(hub, body)


async def _body(send: Send, body: bytes) -> None:
    await send({"type": "http.response.body", "body": body, "more_body": True})


def _event(event_id: int | str | None, kind: str, data: str) -> bytes:
    head = "" if event_id is None else f"id: {event_id}\n"
    return f"{head}event: {kind}\ndata: {data}\n\n".encode()


async def _wait(woken: asyncio.Event, timeout: float) -> bool:
    try:
        await asyncio.wait_for(woken.wait(), timeout)
        return True
    except TimeoutError:
        return False


def _runner(pool: ThreadPoolExecutor) -> Callable[..., Any]:
    loop = asyncio.get_running_loop()

    async def run(fn: Callable[..., T], *args: Any) -> T:
        return await loop.run_in_executor(pool, fn, *args)

    return run


class _woken_by:
    """Subscribes to the store's wake-ups for one context (or any), setting `woken` on the
    event loop; unsubscribes on exit."""

    def __init__(self, store: Served, woken: asyncio.Event, hex_id: str | None) -> None:
        self.loop = asyncio.get_running_loop()
        self.store, self.woken, self.hex_id = store, woken, hex_id
        self.unsubscribe: Callable[[], None] | None = None

    def _wake(self, hex_id: str | None) -> None:
        if self.hex_id is None or hex_id is None or hex_id == self.hex_id:
            with contextlib.suppress(RuntimeError):  # a closed loop: the service is stopping
                self.loop.call_soon_threadsafe(self.woken.set)

    def __enter__(self) -> Self:
        self.unsubscribe = self.store.hooks.watch(self._wake, self.hex_id)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.unsubscribe is not None:
            self.unsubscribe()
