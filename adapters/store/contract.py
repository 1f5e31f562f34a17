"""The operations every surface offers: one typed contract.

`ContextStore` (in process) and `CtxStoreClient` (over HTTP) both declare that they satisfy
it, so mypy checks each of their signatures against these; the SDK integrations depend on
this contract only, and work over either. Each operation also has an HTTP route and a CLI
command (tests/e2e/test_surfaces.py fails when one is missing and not exempt with a reason).
Who acts and for which tenant is the surface's business (an argument in process, the
caller's token and actor header over HTTP), so the contract leaves both out.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any, Protocol
from uuid import UUID

from ctxstore.adapters.store.reply_stream import ReplyStream, StreamPolicy
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
from ctxstore.domain.captured import CapturedCall
from ctxstore.domain.context import JSON, MessageRef
from ctxstore.domain.prompt import Strategy


class ContextOperations(Protocol):
    """What a caller can do with contexts, in process or over HTTP."""

    # ---- contexts ----------------------------------------------------------------------
    def create(
        self, *, name: str | None = None, metadata: JSON | None = None,
        encoding: str | None = None, context_id: UUID | str | None = None,
        model: str | None = None,
    ) -> UUID: ...  # fmt: skip

    def context_for_key(
        self, key: str, *, name: str | None = None, metadata: JSON | None = None
    ) -> UUID: ...

    def lookup_key(self, key: str) -> UUID | None: ...

    def contexts(
        self, *, limit: int = 1000, search: str | None = None, after: UUID | str | None = None
    ) -> list[ContextSummary]: ...

    def fork(
        self, context_id: UUID | str, *, at_version: int | None = None, name: str | None = None,
        metadata: JSON | None = None,
    ) -> UUID: ...  # fmt: skip

    def erase(
        self, context_id: UUID | str, *, reason: str, with_forks: bool | None = None
    ) -> Erasure: ...

    def erasures(self) -> list[Erasure]: ...

    # ---- commands ----------------------------------------------------------------------
    def insert(
        self, context_id: UUID | str, messages: JSON | Sequence[JSON], *,
        after: MessageRef | None = None, expected_version: int | None = None,
        format: str | None = None, calls: Sequence[CapturedCall | JSON] | None = None,
    ) -> Written: ...  # fmt: skip

    def delete(
        self, context_id: UUID | str, ids: MessageRef | Sequence[MessageRef], *,
        expected_version: int | None = None,
    ) -> Written: ...  # fmt: skip

    def replace(
        self, context_id: UUID | str, message_id: MessageRef, message: JSON | str, *,
        expected_version: int | None = None,
    ) -> Written: ...  # fmt: skip

    def compress(
        self, context_id: UUID | str, ids: Sequence[MessageRef], summary: JSON | str, *,
        stats: JSON | None = None, expected_version: int | None = None,
    ) -> Written: ...  # fmt: skip

    def expand(
        self, context_id: UUID | str, summary_id: MessageRef, *,
        expected_version: int | None = None,
    ) -> Written: ...  # fmt: skip

    def batch_start(
        self, context_id: UUID | str, *, expected_version: int | None = None
    ) -> Written: ...

    def batch_end(
        self, context_id: UUID | str, to: int | None = None, *, keep: bool = False,
        expected_version: int | None = None,
    ) -> Written: ...  # fmt: skip

    def record_usage(
        self, context_id: UUID | str, *, model: str, prompt_tokens: int,
        completion_tokens: int = 0, version: int | None = None,
        counted_tokens: int | None = None, prompt: Prompt | None = None,
        sent: Sequence[str | JSON] | None = None, latency: float | None = None,
    ) -> Written: ...  # fmt: skip

    def record_response(
        self, context_id: UUID | str, response: Any, *, request: Any = None,
        latency: float | None = None,
    ) -> Written: ...  # fmt: skip

    def record_call(self, context_id: UUID | str, call: CapturedCall | JSON) -> Written: ...

    def compact(
        self, context_id: UUID | str, *, trigger: str = "manual", dry_run: bool = False
    ) -> Compaction: ...

    # ---- streamed replies ----------------------------------------------------------------
    def begin(
        self, context_id: UUID | str, message: JSON | None = None, *,
        after: MessageRef | None = None, format: str | None = None,
        expected_version: int | None = None,
    ) -> Written: ...  # fmt: skip

    def append(
        self, context_id: UUID | str, message_id: MessageRef, deltas: Any, *,
        expected_version: int | None = None,
    ) -> Written: ...  # fmt: skip

    def finish(
        self, context_id: UUID | str, message_id: MessageRef, message: JSON | None = None, *,
        deltas: Any = None, expected_version: int | None = None,
    ) -> Written: ...  # fmt: skip

    def abandon(
        self, context_id: UUID | str, message_id: MessageRef, *, reason: str | None = None,
        keep: bool = True, deltas: Any = None, expected_version: int | None = None,
    ) -> Written: ...  # fmt: skip

    def stream(
        self, context_id: UUID | str, message: JSON | None = None, *,
        after: MessageRef | None = None, format: str | None = None,
        policy: StreamPolicy | None = None,
    ) -> ReplyStream: ...  # fmt: skip

    # ---- reads -------------------------------------------------------------------------
    def visible(
        self, context_id: UUID | str, *, at_version: int | None = None,
        at_time: datetime | None = None, inline: bool = False, files: str | None = None,
    ) -> VisibleContext: ...  # fmt: skip

    def build_prompt(
        self, context_id: UUID | str, budget: int, strategy: Strategy | None = None, *,
        query: str | None = None, resources: Sequence[JSON] = (), safety: float | None = None,
        at_version: int | None = None,
    ) -> Prompt: ...  # fmt: skip

    def history(
        self, context_id: UUID | str, *, types: Sequence[str] | None = None,
        actor: str | None = None, from_version: int | None = None,
        to_version: int | None = None, changes: bool = False,
    ) -> list[HistoryEntry]: ...  # fmt: skip

    def batches(self, context_id: UUID | str) -> list[BatchFrame]: ...

    def diff(self, context_id: UUID | str, from_version: int, to_version: int) -> Diff: ...

    def token_series(self, context_id: UUID | str, *, points: int = 500) -> TokenSeries: ...

    def calls(self, context_id: UUID | str) -> list[ModelCall]: ...

    def call(self, context_id: UUID | str, number: int) -> ModelCall: ...

    def call_diff(self, context_id: UUID | str, number: int) -> PromptDiff: ...

    def replay(
        self, context_id: UUID | str, *, from_version: int = 1, to_version: int | None = None
    ) -> Iterator[ReplayStep]: ...

    def usage_report(
        self, *, model: str | None = None, context_id: UUID | str | None = None
    ) -> list[ModelUsage]: ...

    def verify(self, context_id: UUID | str) -> Verification: ...

    def audit(
        self, *, since: datetime | None = None, until: datetime | None = None,
        types: Sequence[str] | None = None, actor: str | None = None,
        context_id: UUID | str | None = None, after: int | str = 0, limit: int = 100,
        from_version: int | None = None, to_version: int | None = None,
    ) -> AuditPage: ...  # fmt: skip

    def follow(
        self, context_id: UUID | str, *, after: int | None = None, idle: float | None = None
    ) -> Iterator[TailEvent]: ...

    # ---- transfer ----------------------------------------------------------------------
    def export_events(self, context_id: UUID | str) -> Iterator[str]: ...

    def import_events(
        self, lines: Iterable[str], *, new_id: bool = False, without_trailer: bool = False
    ) -> UUID: ...

    def import_transcript(
        self, messages: str | Sequence[JSON], *, name: str | None = None
    ) -> UUID: ...

    def close(self) -> None: ...


__all__ = ["ContextOperations", "ReplyStream", "StreamPolicy"]
