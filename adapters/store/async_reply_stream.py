"""A reply being stored while it streams, for asyncio callers: the sync handle's batching
(adapters/store/reply_stream.py, KeptDeltas) over the async store's operations."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Self
from uuid import UUID

from ctxstore.adapters.store.faults import type_faults
from ctxstore.adapters.store.reply_stream import KeptDeltas, StreamPolicy
from ctxstore.adapters.store.results import Written
from ctxstore.domain.errors import InvalidOperationError

if TYPE_CHECKING:
    from ctxstore.adapters.store.async_store import AsyncContextStore


@type_faults
class AsyncReplyStream:
    """A reply being stored as it streams, for asyncio callers (adapters/store/
    reply_stream.py says when kept deltas are written)."""

    def __init__(
        self, store: AsyncContextStore, context_id: UUID | str, written: Written,
        policy: StreamPolicy | None, actor: str | None,
    ) -> None:  # fmt: skip
        self._store, self.context_id, self.written = store, context_id, written
        self.id = written.ids[0]
        self._kept = KeptDeltas(policy or StreamPolicy())
        self._actor = actor
        self.closed = False
        self._ending = False  # a finish or abandon is awaited: nothing more is taken
        self.writes = 1

    async def add(self, *deltas: Any) -> Written | None:
        self._check_open()
        return await self.flush() if self._kept.keep(deltas) else None

    async def flush(self) -> Written | None:
        self._check_open()
        kept = self._kept.take()
        if not kept:
            return None
        try:
            self.written = await self._store.append(
                self.context_id, self.id, kept, actor=self._actor
            )
        except BaseException:  # failed or cancelled: kept for the next write
            self._kept.give_back(kept)
            raise
        self.writes += 1
        return self.written

    async def finish(self, message: Any = None) -> Written:
        """Complete the reply with the kept deltas; a failed or cancelled finish keeps
        the stream open and the deltas kept (retry it, or abandon)."""
        return await self._end(
            lambda kept: self._store.finish(
                self.context_id, self.id, message, deltas=kept, actor=self._actor
            )
        )

    async def abandon(self, reason: str | None = None, *, keep: bool = True) -> Written:
        """Stop the reply for good with the kept deltas (see ReplyStream.abandon)."""
        return await self._end(
            lambda kept: self._store.abandon(
                self.context_id,
                self.id,
                reason=reason,
                keep=keep,
                deltas=kept,
                actor=self._actor,
            )
        )

    async def _end(self, write: Any) -> Written:
        self._check_open()
        kept = self._kept.take()
        self._ending = True
        try:
            written: Written = await write(kept or None)
        except BaseException:
            self._kept.give_back(kept)
            self._ending = False
            raise
        self.closed, self.written, self.writes = True, written, self.writes + 1
        return written

    def _check_open(self) -> None:
        if self.closed or self._ending:
            raise InvalidOperationError(f"the stream of message {self.id!r} is closed")

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        if self.closed:
            return
        if exc is None:
            await self.finish()
        else:
            await self.abandon(reason=f"{type(exc).__name__}: {exc}"[:1000])


__all__ = ["AsyncReplyStream"]
