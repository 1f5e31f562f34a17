"""The operations every surface offers: one typed contract.

`ContextStore` (in process), `CtxStoreClient` (over HTTP) and `ShardedStore` declare that
they satisfy it, so mypy checks each of their signatures against these; the SDK
integrations depend on this contract only, and work over any. Each operation carries its
declaration (`@operation`, adapters/store/spec.py): whether it writes, its HTTP route and
scope, its CLI command, where the async and sharded stores run it. The generated faces
follow it and tests/e2e/test_surfaces.py checks every face against it.
Who acts and for which tenant is the surface's business (an argument in process, the
caller's token and actor header over HTTP), so the contract leaves both out.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
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
    SearchPage,
    TailEvent,
    TokenSeries,
    Verification,
    VisibleContext,
    Written,
)
from ctxstore.adapters.store.spec import C, Operation, operation, operations_of
from ctxstore.domain.blobs import BlobRef, StoredBlob
from ctxstore.domain.captured import CapturedCall
from ctxstore.domain.context import JSON, MessageRef
from ctxstore.domain.prompt import Strategy

# Attachments reach the command line inside the messages that hold them (`insert` stores
# an image's bytes once); uploading bare bytes is a program's need.
NO_BLOB_COMMAND = "attachments go in with their messages on the command line"


class ContextOperations(Protocol):
    """What a caller can do with contexts, in process or over HTTP."""

    # ---- contexts ----------------------------------------------------------------------
    @operation("command", "POST /v1/contexts", "create", routed=False)
    def create(
        self, *, name: str | None = None, metadata: JSON | None = None,
        encoding: str | None = None, context_id: UUID | str | None = None,
        model: str | None = None,
    ) -> UUID: ...  # fmt: skip

    @operation("command", "POST /v1/contexts/by-key", "key", routed=False)
    def context_for_key(
        self, key: str, *, name: str | None = None, metadata: JSON | None = None
    ) -> UUID: ...

    @operation("read", "GET /v1/contexts/by-key", "key")
    def lookup_key(self, key: str) -> UUID | None: ...

    @operation("read", "GET /v1/contexts", "contexts")
    def contexts(
        self, *, limit: int = 1000, search: str | None = None, after: UUID | str | None = None
    ) -> list[ContextSummary]: ...

    @operation("command", f"POST {C}/fork", "fork", routed=False)
    def fork(
        self, context_id: UUID | str, *, at_version: int | None = None, name: str | None = None,
        metadata: JSON | None = None,
    ) -> UUID: ...  # fmt: skip

    @operation("command", f"DELETE {C}", "erase", scope="admin", routed=False)
    def erase(
        self, context_id: UUID | str, *, reason: str, with_forks: bool | None = None
    ) -> Erasure: ...

    @operation("read", "GET /v1/erasures", "erasures", scope="audit")
    def erasures(self) -> list[Erasure]: ...

    # ---- attachments ---------------------------------------------------------------------
    @operation("command", "POST /v1/blobs", None, routed=False, reason=NO_BLOB_COMMAND)
    def put_blob(self, data: bytes, media_type: str) -> BlobRef: ...

    @operation("read", "GET /v1/blobs/{sha256}", None, routed=False, reason=NO_BLOB_COMMAND)
    def blob(self, sha256: str) -> StoredBlob: ...

    @operation(
        "command", "POST /v1/blobs/{sha256}/file-ids", None, routed=False,
        reason=NO_BLOB_COMMAND,
    )  # fmt: skip
    def record_file_id(self, sha256: str, provider: str, file_id: str) -> None: ...

    # ---- commands ----------------------------------------------------------------------
    @operation("command", f"POST {C}/insert", "insert", on_loop=True)
    def insert(
        self, context_id: UUID | str, messages: JSON | Sequence[JSON], *,
        after: MessageRef | None = None, expected_version: int | None = None,
        format: str | None = None, calls: Sequence[CapturedCall | JSON] | None = None,
    ) -> Written: ...  # fmt: skip

    @operation("command", f"POST {C}/delete", "delete", on_loop=True)
    def delete(
        self, context_id: UUID | str, ids: MessageRef | Sequence[MessageRef], *,
        expected_version: int | None = None,
    ) -> Written: ...  # fmt: skip

    @operation("command", f"POST {C}/replace", "replace", on_loop=True)
    def replace(
        self, context_id: UUID | str, message_id: MessageRef, message: JSON | str, *,
        expected_version: int | None = None,
    ) -> Written: ...  # fmt: skip

    @operation("command", f"POST {C}/compress", "compress", on_loop=True)
    def compress(
        self, context_id: UUID | str, ids: Sequence[MessageRef], summary: JSON | str, *,
        stats: JSON | None = None, expected_version: int | None = None,
    ) -> Written: ...  # fmt: skip

    @operation("command", f"POST {C}/expand", "expand")
    def expand(
        self, context_id: UUID | str, summary_id: MessageRef, *,
        expected_version: int | None = None,
    ) -> Written: ...  # fmt: skip

    @operation("command", f"POST {C}/batch-start", "batch-start", on_loop=True)
    def batch_start(
        self, context_id: UUID | str, *, expected_version: int | None = None
    ) -> Written: ...

    @operation("command", f"POST {C}/batch-end", "batch-end", on_loop=True)
    def batch_end(
        self, context_id: UUID | str, to: int | None = None, *, keep: bool = False,
        expected_version: int | None = None,
    ) -> Written: ...  # fmt: skip

    @operation("command", f"POST {C}/usage", "usage")
    def record_usage(
        self, context_id: UUID | str, *, model: str, prompt_tokens: int,
        completion_tokens: int = 0, version: int | None = None,
        counted_tokens: int | None = None, prompt: Prompt | None = None,
        sent: Sequence[str | JSON] | None = None, latency: float | None = None,
    ) -> Written: ...  # fmt: skip

    @operation("command", f"POST {C}/responses", "record-response")
    def record_response(
        self, context_id: UUID | str, response: Any, *, request: Any = None,
        latency: float | None = None,
    ) -> Written: ...  # fmt: skip

    @operation("command", f"POST {C}/calls", "record-call")
    def record_call(self, context_id: UUID | str, call: CapturedCall | JSON) -> Written: ...

    @operation("command", f"POST {C}/compact", "compact")
    def compact(
        self, context_id: UUID | str, *, trigger: str = "manual", dry_run: bool = False
    ) -> Compaction: ...

    @operation("command", f"POST {C}/recover", None,
               reason="an SDK's model loop calls it after a provider refused a prompt")  # fmt: skip
    def recover_from_overflow(
        self, context_id: UUID | str, budget: int, strategy: Strategy | None = None, *,
        query: str | None = None, resources: Sequence[JSON] = (), safety: float | None = None,
    ) -> Prompt: ...  # fmt: skip

    # ---- streamed replies ----------------------------------------------------------------
    @operation("command", f"POST {C}/begin", "begin", on_loop=True)
    def begin(
        self, context_id: UUID | str, message: JSON | None = None, *,
        after: MessageRef | None = None, format: str | None = None,
        expected_version: int | None = None,
    ) -> Written: ...  # fmt: skip

    @operation("command", f"POST {C}/append", "append", on_loop=True)
    def append(
        self, context_id: UUID | str, message_id: MessageRef, deltas: Any, *,
        expected_version: int | None = None,
    ) -> Written: ...  # fmt: skip

    @operation("command", f"POST {C}/finish", "finish", on_loop=True)
    def finish(
        self, context_id: UUID | str, message_id: MessageRef, message: JSON | None = None, *,
        deltas: Any = None, expected_version: int | None = None,
    ) -> Written: ...  # fmt: skip

    @operation("command", f"POST {C}/abandon", "abandon", on_loop=True)
    def abandon(
        self, context_id: UUID | str, message_id: MessageRef, *, reason: str | None = None,
        keep: bool = True, deltas: Any = None, expected_version: int | None = None,
    ) -> Written: ...  # fmt: skip

    @operation("command", f"POST {C}/begin", "stream", on_loop=True)
    def stream(
        self, context_id: UUID | str, message: JSON | None = None, *,
        after: MessageRef | None = None, format: str | None = None,
        policy: StreamPolicy | None = None,
    ) -> ReplyStream: ...  # fmt: skip

    # ---- reads -------------------------------------------------------------------------
    @operation("read", f"GET {C}", "show", on_loop=True)
    def visible(
        self, context_id: UUID | str, *, at_version: int | None = None,
        at_time: datetime | None = None, inline: bool = False, files: str | None = None,
    ) -> VisibleContext: ...  # fmt: skip

    @operation("read", f"POST {C}/prompt", "prompt")
    def build_prompt(
        self, context_id: UUID | str, budget: int, strategy: Strategy | None = None, *,
        query: str | None = None, resources: Sequence[JSON] = (), safety: float | None = None,
        at_version: int | None = None,
    ) -> Prompt: ...  # fmt: skip

    @operation("read", f"GET {C}/history", "log")
    def history(
        self, context_id: UUID | str, *, types: Sequence[str] | None = None,
        actor: str | None = None, from_version: int | None = None,
        to_version: int | None = None, changes: bool = False,
    ) -> list[HistoryEntry]: ...  # fmt: skip

    @operation("read", f"GET {C}/batches", "batches")
    def batches(self, context_id: UUID | str) -> list[BatchFrame]: ...

    @operation("read", f"GET {C}/diff", "diff")
    def diff(self, context_id: UUID | str, from_version: int, to_version: int) -> Diff: ...

    @operation("read", f"GET {C}/tokens", "tokens")
    def token_series(self, context_id: UUID | str, *, points: int = 500) -> TokenSeries: ...

    @operation("read", f"GET {C}/calls", "calls")
    def calls(self, context_id: UUID | str) -> list[ModelCall]: ...

    @operation("read", f"GET {C}/calls/{{number}}", "call")
    def call(self, context_id: UUID | str, number: int) -> ModelCall: ...

    @operation("read", f"GET {C}/calls/{{number}}/diff", "call")
    def call_diff(self, context_id: UUID | str, number: int) -> PromptDiff: ...

    @operation("read", f"GET {C}/replay", "replay")
    def replay(
        self, context_id: UUID | str, *, from_version: int = 1, to_version: int | None = None
    ) -> Iterator[ReplayStep]: ...

    @operation("read", "GET /v1/usage", "usage-report", scope="audit")
    def usage_report(
        self, *, model: str | None = None, context_id: UUID | str | None = None
    ) -> list[ModelUsage]: ...

    @operation("read", f"GET {C}/verify", "verify", scope="audit", routed=False)
    def verify(self, context_id: UUID | str) -> Verification: ...

    @operation("read", "GET /v1/audit", "audit", scope="audit")
    def audit(
        self, *, since: datetime | None = None, until: datetime | None = None,
        types: Sequence[str] | None = None, actor: str | None = None,
        context_id: UUID | str | None = None, after: int | str = 0, limit: int = 100,
        from_version: int | None = None, to_version: int | None = None,
    ) -> AuditPage: ...  # fmt: skip

    @operation("read", f"GET {C}/events", "tail", on_loop=True)
    def follow(
        self, context_id: UUID | str, *, after: int | None = None, idle: float | None = None
    ) -> Iterator[TailEvent]: ...

    # ---- search ------------------------------------------------------------------------
    @operation("read", "GET /v1/search", "search", routed=False)
    def search(
        self, query: str, *, context_ids: Sequence[UUID | str] | None = None,
        roles: Sequence[str] | None = None, since: datetime | None = None,
        until: datetime | None = None, include_hidden: bool = False, limit: int = 20,
        cursor: str | None = None,
    ) -> SearchPage: ...  # fmt: skip

    # ---- transfer ----------------------------------------------------------------------
    @operation("read", f"GET {C}/export", "export", scope="audit")
    def export_events(self, context_id: UUID | str) -> Iterator[str]: ...

    @operation("command", "POST /v1/contexts/import", "import", routed=False)
    def import_events(
        self, lines: Iterable[str], *, new_id: bool = False, without_trailer: bool = False
    ) -> UUID: ...

    @operation("command", "POST /v1/contexts/import-transcript", "import", routed=False)
    def import_transcript(
        self, messages: str | Sequence[JSON], *, name: str | None = None
    ) -> UUID: ...

    @operation(
        "lifetime",
        None,
        None,
        on_loop=True,
        routed=False,
        reason="the lifetime of a connection, not an operation on contexts",
    )
    def close(self) -> None: ...


# Each operation as its faces offer it, in the order declared (adapters/store/spec.py).
OPERATIONS: Mapping[str, Operation] = operations_of(ContextOperations)

__all__ = ["OPERATIONS", "ContextOperations", "ReplyStream", "StreamPolicy"]
