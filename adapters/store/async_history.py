"""The async store's reads that run on its worker threads, awaited: history, batches, diff,
token series, model calls, replay, usage, verification, audit, and export and import.
They read the sync store's surface (history_surface.py) as it is; only the head reads and
the commands run on the event loop (async_store.py)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any, TypeVar
from uuid import UUID

from ctxstore.adapters.store.facade import ContextStore
from ctxstore.adapters.store.results import (
    AuditPage,
    BatchFrame,
    Diff,
    HistoryEntry,
    ModelCall,
    ModelUsage,
    PromptDiff,
    ReplayStep,
    TokenSeries,
    Verification,
)
from ctxstore.domain.context import JSON

T = TypeVar("T")


class AsyncHistory:
    """What AsyncContextStore awaits on its worker threads (see the module)."""

    _store: ContextStore
    _pool: ThreadPoolExecutor

    async def _offload(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))

    async def history(
        self, context_id: UUID | str, *, types: Sequence[str] | None = None,
        actor: str | None = None, from_version: int | None = None,
        to_version: int | None = None, changes: bool = False,
    ) -> list[HistoryEntry]:  # fmt: skip
        return await self._offload(
            self._store.history, context_id, types=types, actor=actor,
            from_version=from_version, to_version=to_version, changes=changes,
        )  # fmt: skip

    async def batches(self, context_id: UUID | str) -> list[BatchFrame]:
        return await self._offload(self._store.batches, context_id)

    async def diff(self, context_id: UUID | str, from_version: int, to_version: int) -> Diff:
        return await self._offload(self._store.diff, context_id, from_version, to_version)

    async def token_series(self, context_id: UUID | str, *, points: int = 500) -> TokenSeries:
        return await self._offload(self._store.token_series, context_id, points=points)

    async def calls(self, context_id: UUID | str) -> list[ModelCall]:
        return await self._offload(self._store.calls, context_id)

    async def call(self, context_id: UUID | str, number: int) -> ModelCall:
        return await self._offload(self._store.call, context_id, number)

    async def call_diff(self, context_id: UUID | str, number: int) -> PromptDiff:
        return await self._offload(self._store.call_diff, context_id, number)

    async def replay(
        self, context_id: UUID | str, *, from_version: int = 1, to_version: int | None = None
    ) -> list[ReplayStep]:
        return await self._offload(
            lambda: list(self._store.replay(context_id, from_version=from_version,
                                            to_version=to_version))
        )  # fmt: skip

    async def usage_report(
        self, *, model: str | None = None, context_id: UUID | str | None = None,
        tenant: str | None = None,
    ) -> list[ModelUsage]:  # fmt: skip
        return await self._offload(
            self._store.usage_report, model=model, context_id=context_id, tenant=tenant
        )

    async def verify(self, context_id: UUID | str | None = None) -> Verification:
        return await self._offload(self._store.verify, context_id)

    async def audit(
        self, *, since: datetime | None = None, until: datetime | None = None,
        types: Sequence[str] | None = None, actor: str | None = None,
        context_id: UUID | str | None = None, tenant: str | None = None, after: int = 0,
        limit: int = 100, from_version: int | None = None, to_version: int | None = None,
    ) -> AuditPage:  # fmt: skip
        return await self._offload(
            self._store.audit, since=since, until=until, types=types, actor=actor,
            context_id=context_id, tenant=tenant, after=after, limit=limit,
            from_version=from_version, to_version=to_version,
        )  # fmt: skip

    # ---- transfer ------------------------------------------------------------------------

    async def export_events(self, context_id: UUID | str) -> list[str]:
        return await self._offload(lambda: list(self._store.export_events(context_id)))

    async def import_events(
        self, lines: Iterable[str], *, new_id: bool = False, without_trailer: bool = False,
        progress: Callable[[int, int], None] | None = None, tenant: str | None = None,
    ) -> UUID:  # fmt: skip
        return await self._offload(
            self._store.import_events, list(lines), new_id=new_id,
            without_trailer=without_trailer, progress=progress, tenant=tenant,
        )  # fmt: skip

    async def import_transcript(
        self, messages: str | Sequence[JSON], *, name: str | None = None,
        actor: str | None = None, progress: Callable[[int, int], None] | None = None,
        tenant: str | None = None,
    ) -> UUID:  # fmt: skip
        return await self._offload(
            self._store.import_transcript, messages, name=name, actor=actor,
            progress=progress, tenant=tenant,
        )  # fmt: skip
