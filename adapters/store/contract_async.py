"""The operations in async form: what `await ctxstore.aopen(url)` gives (AsyncContextStore)
declares it, so mypy checks its signatures against these, as ContextOperations (contract.py)
lists them for the sync store and the HTTP client. The same operations, each awaited; reads
that return an iterator in the sync contract return a list (`replay`, `export_events`), and
`follow` is an async iterator. tests/integration/test_async_store.py checks that the two
contracts name the same operations with the same parameters.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol
from uuid import UUID

from ctxstore.adapters.store.reply_stream import StreamPolicy
from ctxstore.adapters.store.results import (
    AuditPage,
    BatchFrame,
    Compaction,
    ContextSummary,
    Diff,
    Erasure,
    HistoryEntry,
    ModelCall,
    ModelUsage,
    Prompt,
    PromptDiff,
    ReplayStep,
    TailEvent,
    TokenSeries,
    Verification,
    VisibleContext,
    Written,
)
from ctxstore.domain.context import JSON, MessageRef
from ctxstore.domain.prompt import Strategy

if TYPE_CHECKING:
    from ctxstore.adapters.store.async_reply_stream import AsyncReplyStream


class AsyncContextOperations(Protocol):
    """What an asyncio caller can do with contexts: ContextOperations, awaited."""

    # ---- contexts ----------------------------------------------------------------------
    async def create(
        self, *, name: str | None = None, metadata: JSON | None = None,
        encoding: str | None = None, context_id: UUID | str | None = None,
        model: str | None = None,
    ) -> UUID: ...  # fmt: skip

    async def context_for_key(
        self, key: str, *, name: str | None = None, metadata: JSON | None = None
    ) -> UUID: ...

    async def contexts(
        self, *, limit: int = 1000, search: str | None = None
    ) -> list[ContextSummary]: ...

    async def fork(
        self, context_id: UUID | str, *, at_version: int | None = None, name: str | None = None,
        metadata: JSON | None = None,
    ) -> UUID: ...  # fmt: skip

    async def erase(
        self, context_id: UUID | str, *, reason: str, with_forks: bool | None = None
    ) -> Erasure: ...

    async def erasures(self) -> list[Erasure]: ...

    # ---- commands ----------------------------------------------------------------------
    async def insert(
        self, context_id: UUID | str, messages: JSON | Sequence[JSON], *,
        after: MessageRef | None = None, expected_version: int | None = None,
        format: str | None = None,
    ) -> Written: ...  # fmt: skip

    async def delete(
        self, context_id: UUID | str, ids: MessageRef | Sequence[MessageRef], *,
        expected_version: int | None = None,
    ) -> Written: ...  # fmt: skip

    async def replace(
        self, context_id: UUID | str, message_id: MessageRef, message: JSON | str, *,
        expected_version: int | None = None,
    ) -> Written: ...  # fmt: skip

    async def compress(
        self, context_id: UUID | str, ids: Sequence[MessageRef], summary: JSON | str, *,
        stats: JSON | None = None, expected_version: int | None = None,
    ) -> Written: ...  # fmt: skip

    async def expand(
        self, context_id: UUID | str, summary_id: MessageRef, *,
        expected_version: int | None = None,
    ) -> Written: ...  # fmt: skip

    async def batch_start(
        self, context_id: UUID | str, *, expected_version: int | None = None
    ) -> Written: ...

    async def batch_end(
        self, context_id: UUID | str, to: int | None = None, *, keep: bool = False,
        expected_version: int | None = None,
    ) -> Written: ...  # fmt: skip

    async def record_usage(
        self, context_id: UUID | str, *, model: str, prompt_tokens: int,
        completion_tokens: int = 0, version: int | None = None,
        counted_tokens: int | None = None, sent: Sequence[str | JSON] | None = None,
        latency: float | None = None,
    ) -> Written: ...  # fmt: skip

    async def record_response(
        self, context_id: UUID | str, response: Any, *, request: Any = None,
        latency: float | None = None,
    ) -> Written: ...  # fmt: skip

    async def compact(self, context_id: UUID | str, *, dry_run: bool = False) -> Compaction: ...

    # ---- streamed replies ----------------------------------------------------------------
    async def begin(
        self, context_id: UUID | str, message: JSON | None = None, *,
        after: MessageRef | None = None, format: str | None = None,
        expected_version: int | None = None,
    ) -> Written: ...  # fmt: skip

    async def append(
        self, context_id: UUID | str, message_id: MessageRef, deltas: Any, *,
        expected_version: int | None = None,
    ) -> Written: ...  # fmt: skip

    async def finish(
        self, context_id: UUID | str, message_id: MessageRef, message: JSON | None = None, *,
        deltas: Any = None, expected_version: int | None = None,
    ) -> Written: ...  # fmt: skip

    async def abandon(
        self, context_id: UUID | str, message_id: MessageRef, *, reason: str | None = None,
        keep: bool = True, deltas: Any = None, expected_version: int | None = None,
    ) -> Written: ...  # fmt: skip

    async def stream(
        self, context_id: UUID | str, message: JSON | None = None, *,
        after: MessageRef | None = None, format: str | None = None,
        policy: StreamPolicy | None = None,
    ) -> AsyncReplyStream: ...  # fmt: skip

    # ---- reads -------------------------------------------------------------------------
    async def visible(
        self, context_id: UUID | str, *, at_version: int | None = None,
        at_time: datetime | None = None, inline: bool = False, files: str | None = None,
    ) -> VisibleContext: ...  # fmt: skip

    async def build_prompt(
        self, context_id: UUID | str, budget: int, strategy: Strategy | None = None, *,
        query: str | None = None, resources: Sequence[JSON] = (), safety: float | None = None,
        at_version: int | None = None,
    ) -> Prompt: ...  # fmt: skip

    async def history(
        self, context_id: UUID | str, *, types: Sequence[str] | None = None,
        actor: str | None = None, from_version: int | None = None,
        to_version: int | None = None, changes: bool = False,
    ) -> list[HistoryEntry]: ...  # fmt: skip

    async def batches(self, context_id: UUID | str) -> list[BatchFrame]: ...

    async def diff(self, context_id: UUID | str, from_version: int, to_version: int) -> Diff: ...

    async def token_series(self, context_id: UUID | str, *, points: int = 500) -> TokenSeries: ...

    async def calls(self, context_id: UUID | str) -> list[ModelCall]: ...

    async def call(self, context_id: UUID | str, number: int) -> ModelCall: ...

    async def call_diff(self, context_id: UUID | str, number: int) -> PromptDiff: ...

    async def replay(
        self, context_id: UUID | str, *, from_version: int = 1, to_version: int | None = None
    ) -> list[ReplayStep]: ...

    async def usage_report(
        self, *, model: str | None = None, context_id: UUID | str | None = None
    ) -> list[ModelUsage]: ...

    async def verify(self, context_id: UUID | str) -> Verification: ...

    async def audit(
        self, *, since: datetime | None = None, until: datetime | None = None,
        types: Sequence[str] | None = None, actor: str | None = None,
        context_id: UUID | str | None = None, after: int = 0, limit: int = 100,
        from_version: int | None = None, to_version: int | None = None,
    ) -> AuditPage: ...  # fmt: skip

    def follow(
        self, context_id: UUID | str, *, after: int | None = None, idle: float | None = None
    ) -> AsyncIterator[TailEvent]: ...

    # ---- transfer ----------------------------------------------------------------------
    async def export_events(self, context_id: UUID | str) -> list[str]: ...

    async def import_events(
        self, lines: Iterable[str], *, new_id: bool = False, without_trailer: bool = False
    ) -> UUID: ...

    async def import_transcript(
        self, messages: str | Sequence[JSON], *, name: str | None = None
    ) -> UUID: ...

    async def close(self) -> None: ...
