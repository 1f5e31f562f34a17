"""The auditor's and the debugger's half of the facade: who changed what and when (audit,
the index behind it, verify), what a context went through (diff, replay, model calls),
copies of it (fork, export, import) and its erasure. A part of ContextStore, which offers
its methods as its own; the work is in adapters/store/audit.py, debug.py, transfer.py and
erasure.py."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from typing import TypeVar
from uuid import UUID

from ctxstore.adapters.store import (
    audit,
    calls,
    debug,
    erasure,
    reads,
    transfer,
)
from ctxstore.adapters.store.core import StoreCore
from ctxstore.adapters.store.replicas import Replicas
from ctxstore.adapters.store.results import (
    AuditPage,
    Diff,
    Erasure,
    ModelCall,
    PromptDiff,
    ReplayStep,
    Verification,
)
from ctxstore.adapters.store.writer import Writer
from ctxstore.domain.blobs import references
from ctxstore.domain.context import JSON
from ctxstore.projections.calls import prompt_diff

T = TypeVar("T")


class HistorySurface:
    """What ContextStore offers over a context's history (see the module)."""

    def __init__(self, core: StoreCore, writer: Writer, replicas: Replicas | None) -> None:
        self._core = core
        self._writer = writer
        self._replicas = replicas

    def read(self, cid: UUID | None, read: Callable[[StoreCore], T]) -> T:
        """A read that only looks: on a replica that has this store's writes, if any."""
        if self._replicas is None:
            return read(self._core)
        return self._replicas.read(cid, read)

    def audit_read(self, read: Callable[[StoreCore], T]) -> T:
        if self._replicas is None:
            return read(self._core)
        return self._replicas.audit(read)

    def audit(
        self, *, since: datetime | None = None, until: datetime | None = None,
        types: Sequence[str] | None = None, actor: str | None = None,
        context_id: UUID | str | None = None, tenant: str | None = None, after: int | str = 0,
        limit: int = 100, from_version: int | None = None, to_version: int | None = None,
    ) -> AuditPage:  # fmt: skip
        """Events across contexts after position `after` (a page's cursor), in the order
        recorded.

        Filters: a time range (since inclusive, until exclusive), event types, actor and
        context, and with a context a window of its versions (both inclusive). Pass the
        page's `cursor` back as `after` for the next page, or later to follow new events.
        Raises InvalidOperationError.
        """
        return self.audit_read(lambda core: audit.audit_page(
            core, since=since, until=until, types=types, actor=actor,
            context_id=context_id, tenant=tenant, after=after, limit=limit,
            from_version=from_version, to_version=to_version, index=core is self._core,
        ))  # fmt: skip

    def verify(self, context_id: UUID | str | None = None) -> Verification:
        """Check the hash chain of one context, or of all; names each first broken link."""
        if context_id is None:
            return self.read(None, lambda core: audit.verify(core, None))
        return self.read(self._core.id(context_id), lambda core: audit.verify(core, context_id))

    def diff(self, context_id: UUID | str, from_version: int, to_version: int) -> Diff:
        """Messages added, removed and changed between two versions, and the token delta."""
        return self.read(
            self._core.id(context_id),
            lambda core: debug.diff(core, context_id, from_version, to_version),
        )

    def replay(
        self, context_id: UUID | str, *, from_version: int = 1, to_version: int | None = None
    ) -> Iterator[ReplayStep]:
        """(event, visible context after it, calls that sent it) for each event in the range."""
        return self.read(
            self._core.id(context_id),
            lambda core: debug.replay(
                core, context_id, from_version=from_version, to_version=to_version
            ),
        )

    def calls(self, context_id: UUID | str) -> list[ModelCall]:
        """The model calls recorded against a context, in order (numbered from 1), with
        their cost where the price table (Settings.prices) names the model."""
        found = self.audit_read(
            lambda core: calls.model_calls(core, context_id, index=core is self._core)
        )
        return [self._priced(c) for c in found]

    def call(self, context_id: UUID | str, number: int) -> ModelCall:
        """Recorded call `number` (1 the first, -1 the last) with exactly the messages sent
        and the response written for it."""
        return self._priced(
            self.audit_read(
                lambda core: calls.model_call_numbered(
                    core, context_id, number, index=core is self._core
                )
            )
        )

    def call_diff(self, context_id: UUID | str, number: int) -> PromptDiff:
        """What call `number` (-1 the last) sent against what the call before it sent:
        the messages added, removed and changed between two calls."""
        call, before = self.audit_read(
            lambda core: calls.call_with_previous(
                core, context_id, number, index=core is self._core
            )
        )
        return prompt_diff(call, before)

    def _priced(self, call: ModelCall) -> ModelCall:
        price = self._core.settings.price_of(call.model)
        if price is None:
            return call
        cost = (call.prompt_tokens * price.input + call.completion_tokens * price.output) / 1e6
        return call.model_copy(update={"cost": round(cost, 8)})

    def fork(
        self, context_id: UUID | str, *, at_version: int | None = None, name: str | None = None,
        metadata: JSON | None = None, actor: str | None = None,
    ) -> UUID:  # fmt: skip
        """A new context that starts as a copy of this one's visible context (at a version)."""
        fork = debug.fork_context(
            self._writer, context_id, at_version=at_version, name=name, metadata=metadata,
            actor=self._core.actor(actor),
        )  # fmt: skip
        # The copies refer to the source's attachments: they stay while the fork shows them.
        held = reads.visible_messages(self._core, fork, None)
        refs = {r.sha256 for m in held for r in references(m)}
        if refs:
            self._core.storage.blobs.keep(self._core.tenant_of(fork), fork, [], refs)
        return fork

    def export_events(self, context_id: UUID | str) -> Iterator[str]:
        """The context's events as JSON lines (ids, versions, timestamps and chains kept)."""
        return self.read(
            self._core.id(context_id), lambda core: transfer.export_lines(core, context_id)
        )

    def import_events(
        self, lines: Iterable[str], *, new_id: bool = False, without_trailer: bool = False,
        progress: Callable[[int, int], None] | None = None, tenant: str | None = None,
    ) -> UUID:  # fmt: skip
        """Store an exported context's events; returns its id. All or nothing. With
        `tenant`, only that tenant's context is accepted. Raises InvalidImportError (naming
        the line), ContextExistsError."""
        return transfer.import_lines(
            self._writer, lines, new_id=new_id, progress=progress, tenant=tenant,
            without_trailer=without_trailer,
        )  # fmt: skip

    def import_transcript(
        self, messages: str | Sequence[JSON], *, name: str | None = None,
        actor: str | None = None, progress: Callable[[int, int], None] | None = None,
        tenant: str | None = None,
    ) -> UUID:  # fmt: skip
        """A new context (`tenant`'s) from an OpenAI-format transcript (a list of messages,
        or its JSON / JSONL text); all messages or nothing."""
        parsed = (
            transfer.transcript_messages(messages) if isinstance(messages, str) else list(messages)
        )
        return transfer.import_transcript(
            self._writer, parsed, name=name, actor=self._core.actor(actor), progress=progress,
            tenant=tenant,
        )  # fmt: skip

    def erase(
        self, context_id: UUID | str, *, reason: str, actor: str | None = None,
        with_forks: bool | None = None,
    ) -> Erasure:  # fmt: skip
        """Delete a context's contents for good (its events, snapshots, audit rows); leaves
        a record of the erasure, by whom and why. A context whose forks hold copies of its
        messages is refused unless `with_forks` is True (they are erased too, and the
        record names them) or False (they stay, and the record's residue names them).
        Raises ContextNotFoundError, InvalidOperationError."""
        audit.catch_up(self._core)  # nothing of the context is left for the index to add
        return erasure.erase_context(
            self._core, context_id, actor=self._core.actor(actor), reason=reason,
            with_forks=with_forks,
        )  # fmt: skip

    def erasures(self) -> list[Erasure]:
        """The erasure records, oldest first."""
        return self._core.storage.eraser().records()
