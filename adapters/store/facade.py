"""ContextStore: the Python facade, every public method one command or one read.

The facade composes the store's parts and holds nothing of the eventsourcing library's
write API: commands go through the writer (adapters/store/writer.py), which alone turns
them into stored events with their chain links and the snapshot policy; reads go through
adapters/store/reads.py and the audit, debug and transfer modules beside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import suppress
from datetime import datetime
from typing import TYPE_CHECKING, Self
from uuid import UUID

from ctxstore.adapters.capture.spans import traced
from ctxstore.adapters.settings import Settings, load_settings
from ctxstore.adapters.storage.events import EventStorage
from ctxstore.adapters.storage.urls import replica_urls
from ctxstore.adapters.store import reads, sweeping
from ctxstore.adapters.store.admin import StoreAdmin
from ctxstore.adapters.store.attachments import Attachments
from ctxstore.adapters.store.commands import Commands
from ctxstore.adapters.store.compaction_surface import CompactionSurface
from ctxstore.adapters.store.contract import ContextOperations
from ctxstore.adapters.store.core import StoreCore
from ctxstore.adapters.store.delegation import delegated
from ctxstore.adapters.store.faults import type_faults
from ctxstore.adapters.store.history_surface import HistorySurface
from ctxstore.adapters.store.hooks import StoreHooks
from ctxstore.adapters.store.model_calls_surface import ModelCallsSurface
from ctxstore.adapters.store.parts import StoreParts
from ctxstore.adapters.store.replicas import Replicas
from ctxstore.adapters.store.store_hooks import Hooks
from ctxstore.adapters.store.streaming import StreamingSurface
from ctxstore.adapters.store.writer import Writer
from ctxstore.domain.context import JSON, Context, MessageRef
from ctxstore.domain.errors import BlobNotFoundError, ContextExistsError
from ctxstore.domain.limits import check_page, chosen_id, key_context_id
from ctxstore.projections.listing import list_contexts

# Annotations only; and what one operation alone uses (recording a call, compacting, search,
# usage, the tokenizer's model table) is imported where it is used: a command line that runs
# one read loads neither (ctxstore contexts, show, log: see bench/bench_cli.py).
if TYPE_CHECKING:
    from ctxstore.adapters.llm.tokenizer import Tokenizers
    from ctxstore.adapters.storage.migrations import Migration
    from ctxstore.adapters.store.results import (
        BatchFrame,
        ContextSummary,
        HistoryEntry,
        Prompt,
        SearchPage,
        TokenSeries,
        VisibleContext,
        Written,
    )
    from ctxstore.domain.blobs import BlobRef, StoredBlob
    from ctxstore.domain.captured import CapturedCall
    from ctxstore.domain.messages import Message
    from ctxstore.domain.packing import Resource
    from ctxstore.domain.prompt import Similarity, Strategy


@traced("insert", "delete", "erase", "search")  # spans, when a tracer provider is configured
@type_faults
class ContextStore:
    """Stores contexts as event streams; every public method is one command or one read
    (the contract, ContextOperations: checked below, as a Protocol is, by its shape)."""

    # Operations its parts hold (history, streamed replies, compaction), offered as its own.
    audit = delegated("_history", HistorySurface.audit)
    verify = delegated("_history", HistorySurface.verify)
    diff = delegated("_history", HistorySurface.diff)
    replay = delegated("_history", HistorySurface.replay)
    calls = delegated("_history", HistorySurface.calls)
    call = delegated("_history", HistorySurface.call)
    call_diff = delegated("_history", HistorySurface.call_diff)
    fork = delegated("_history", HistorySurface.fork)
    export_events = delegated("_history", HistorySurface.export_events)
    import_events = delegated("_history", HistorySurface.import_events)
    import_transcript = delegated("_history", HistorySurface.import_transcript)
    erase = delegated("_history", HistorySurface.erase)
    erasures = delegated("_history", HistorySurface.erasures)
    begin = delegated("_streaming", StreamingSurface.begin)
    append = delegated("_streaming", StreamingSurface.append)
    finish = delegated("_streaming", StreamingSurface.finish)
    abandon = delegated("_streaming", StreamingSurface.abandon)
    stream = delegated("_streaming", StreamingSurface.stream)
    follow = delegated("_streaming", StreamingSurface.follow)
    record_usage = delegated("_calls", ModelCallsSurface.record_usage)
    record_response = delegated("_calls", ModelCallsSurface.record_response)
    record_call = delegated("_calls", ModelCallsSurface.record_call)
    usage_report = delegated("_calls", ModelCallsSurface.usage_report)
    compact = delegated("_compaction", CompactionSurface.compact)
    recover_from_overflow = delegated("_compaction", CompactionSurface.recover_from_overflow)

    def __init__(
        self, storage: EventStorage, settings: Settings, *, url: str = "",
        replicas: Sequence[str] = (),
    ) -> None:  # fmt: skip
        self._core = StoreCore(storage, settings, url)
        self._replicas = (
            Replicas(self._core, list(replicas), settings, settings.replica_wait)
            if replicas else None
        )  # fmt: skip
        self._storage = storage
        self._writer = Writer(self._core)
        self._attachments = Attachments(self._core)
        self._commands = Commands(self._core, self._attachments)
        self._history = HistorySurface(self._core, self._writer, self._replicas)
        self._streaming = StreamingSurface(
            self._core, self._writer, self._commands, self._compacting, self
        )
        self._compaction = CompactionSurface(self._core, self._writer)
        self._calls = ModelCallsSurface(self._core, self._writer)
        # What the service, the live tail and the integrations take beside the contract.
        self.hooks: StoreHooks = Hooks(self._core, self._writer, self._attachments)
        # (for the faces built on this store: adapters/store/parts.py's parts_of)
        self._parts = StoreParts(self._core, self._writer, self._commands, storage)
        # What an operator does to the store (tokens, keys, retention, the audit index, the
        # schema): beside the store's own operations, not among them.
        self.admin = StoreAdmin(self._core, storage)

    @classmethod
    def from_url(
        cls, url: str | None = None, settings: Settings | None = None, *, migrate: bool = True,
        create: bool = True, replicas: Sequence[str] | None = None,
    ) -> ContextStore:  # fmt: skip
        """Open the store at `url`, else CTXSTORE_URL, else the embedded SQLite file. An
        outdated schema is upgraded when this role may (unless not `migrate`: then refused).
        Without `create`, a SQLite file that does not exist is refused (StoreURLError)
        instead of made.

        `replicas` (else the URL's `replica=host:port` parameters, else CTXSTORE_REPLICAS):
        PostgreSQL streaming replicas that reads which only look are sent to, when they
        have this store's own writes (adapters/store/replicas.py)."""
        settings = settings or load_settings()
        resolved, in_url = replica_urls(url or settings.resolved_url())
        chosen = list(replicas if replicas is not None else in_url or settings.replicas)
        storage = EventStorage.open(resolved, settings, migrate=migrate, create=create)
        return cls(storage, settings, url=resolved, replicas=chosen)

    @classmethod
    def setup(cls, url: str | None = None, settings: Settings | None = None) -> list[Migration]:
        """Bring the store's schema to this release's version (`ctxstore migrate`); returns
        the migrations applied, none when it was current."""
        with cls.from_url(url, settings) as store:
            return list(store._storage.applied)

    @property
    def settings(self) -> Settings:
        return self._core.settings

    @property
    def url(self) -> str:
        return self._core.url

    @property
    def tokenizers(self) -> Tokenizers:
        return self._core.tokenizers

    # ---- commands -------------------------------------------------------------------

    def create(
        self, *, name: str | None = None, metadata: JSON | None = None,
        encoding: str | None = None, actor: str | None = None, tenant: str | None = None,
        context_id: UUID | str | None = None, model: str | None = None,
    ) -> UUID:  # fmt: skip
        """Create an empty context counting tokens with `encoding`, else the encoding of
        `model` (gpt-4o, gpt-5, o3, ...: o200k_base; gpt-4, gpt-3.5: cl100k_base), else
        CTXSTORE_ENCODING (o200k_base); returns its id.

        `tenant` names its owner on a shared service (the HTTP service sets it). A caller
        may choose the id (e.g. derived from its own session key); raises ContextExistsError
        when that id is taken.
        """
        from ctxstore.adapters.llm.tokenizer import check_encoding_name, encoding_for_model

        ctx = Context.start(
            name=name, metadata=metadata, actor=self._core.actor(actor), tenant=tenant,
            encoding=check_encoding_name(
                encoding or (model and encoding_for_model(model)) or self.settings.encoding
            ),
            context_id=None if context_id is None else chosen_id(context_id),
        )  # fmt: skip
        self._writer.create(ctx)
        self._core.cache.remember_tenant(ctx.id, tenant)
        return ctx.id

    def insert(
        self, context_id: UUID | str, messages: Message | JSON | Sequence[Message | JSON], *,
        after: MessageRef | None = None, actor: str | None = None,
        expected_version: int | None = None, format: str | None = None,
        calls: Sequence[CapturedCall | JSON] | None = None,
    ) -> Written:  # fmt: skip
        """Append messages, or place them after a visible message (id or position). Each
        is stored in its own shape — a chat message, a Responses item or an Anthropic
        message, an SDK's object or a dict, detected or named by `format` — and reads
        back exactly as it came. `calls`: model calls whose replies these messages are,
        recorded in the same write (as `record_call` does, made with the context before it).

        Raises: ContextNotFoundError, InvalidMessageError, UnknownMessageError,
        MalformedTranscriptError, VersionConflictError.
        """
        cid, command = self._commands.insert(
            context_id, messages, after=after, actor=actor, format=format, calls=calls
        )
        return self._compacting(self._writer.command(cid, expected_version, command), actor)

    def _compacting(self, written: Written, actor: str | None) -> Written:
        """After an insert or a finish: compact proactively when a threshold is crossed."""
        from ctxstore.adapters.store import compaction

        if self.settings.compaction.auto and compaction.crossed(
            self._core, written.tokens, written.messages
        ):
            compaction.compact_after_write(
                self._core, self._writer, written.context_id, self._core.actor(actor)
            )
        return written

    def delete(
        self, context_id: UUID | str, ids: MessageRef | Sequence[MessageRef], *,
        actor: str | None = None, expected_version: int | None = None,
    ) -> Written:  # fmt: skip
        """Hide visible messages; a tool call and its results go together or not at all."""
        cid, command = self._commands.delete(context_id, ids, actor=actor)
        return self._writer.command(cid, expected_version, command)

    def replace(
        self, context_id: UUID | str, message_id: MessageRef, message: Message | JSON | str, *,
        actor: str | None = None, expected_version: int | None = None,
    ) -> Written:  # fmt: skip
        """Give a visible message new content under the same id (a string: new text only)."""
        cid, command = self._commands.replace(context_id, message_id, message, actor=actor)
        return self._writer.command(cid, expected_version, command)

    def compress(
        self, context_id: UUID | str, ids: MessageRef | Sequence[MessageRef],
        summary: Message | JSON | str, *, stats: JSON | None = None, actor: str | None = None,
        expected_version: int | None = None,
    ) -> Written:  # fmt: skip
        """Put one summary in place of a contiguous run of visible messages.

        A plain string becomes a user message marked as a summary in its metadata.
        """
        cid, command = self._commands.compress(context_id, ids, summary, stats=stats, actor=actor)
        return self._writer.command(cid, expected_version, command)

    def expand(
        self, context_id: UUID | str, summary_id: MessageRef, *, actor: str | None = None,
        expected_version: int | None = None,
    ) -> Written:  # fmt: skip
        """Put the messages a summary covers back in its place, keeping everything written
        after it (one event). Raises InvalidOperationError when it is not a summary or a
        covered message is visible again, MalformedTranscriptError when the result would not
        be a well-formed transcript."""
        cid, command = self._commands.expand(context_id, summary_id, actor=actor)
        return self._writer.command(cid, expected_version, command)

    def batch_start(
        self, context_id: UUID | str, *, actor: str | None = None,
        expected_version: int | None = None,
    ) -> Written:  # fmt: skip
        """Open batch n+1 on top of the current batch n."""
        cid, command = self._commands.batch_start(context_id, actor=actor)
        return self._writer.command(cid, expected_version, command)

    def batch_end(
        self, context_id: UUID | str, to: int | None = None, *, keep: bool = False,
        actor: str | None = None, expected_version: int | None = None,
    ) -> Written:  # fmt: skip
        """Close the batches above `to` (default: the top one), rolling back unless keep."""
        cid, command = self._commands.batch_end(context_id, to, keep=keep, actor=actor)
        return self._writer.command(cid, expected_version, command)

    # ---- reads ------------------------------------------------------------------------

    def visible(
        self, context_id: UUID | str, *, at_version: int | None = None,
        at_time: datetime | None = None, inline: bool = False, files: str | None = None,
    ) -> VisibleContext:  # fmt: skip
        """The visible context now, at a past version, or as it was at a time. Attachments
        read as references (`ctxstore-blob:...`); with `files` ("openai", "anthropic") as
        that provider's file ids where one was recorded (`record_file_id`); with `inline`
        (the rest) as the data they were given as (a data: URL or base64)."""
        cid = self._core.id(context_id)
        seen = self._history.read(cid, lambda core: reads.visible(core, cid, at_version, at_time))
        if not inline and files is None:
            return seen
        messages = self._attachments.readable(
            self._core.tenant_of(cid), seen.messages, inline=inline, files=files
        )
        return seen.model_copy(update={"messages": messages})

    def put_blob(self, data: bytes, media_type: str, *, tenant: str | None = None) -> BlobRef:
        """Store an attachment (once per tenant, by its sha256) for messages to refer to by
        its reference (`ref.uri()`); raises LimitExceededError over CTXSTORE_MAX_BLOB_BYTES."""
        return self._attachments.put(tenant, data, media_type)

    def record_file_id(
        self, sha256: str, provider: str, file_id: str, *, tenant: str | None = None
    ) -> None:
        """Note the id a provider's Files API ("openai", "anthropic") gave an attachment,
        for readers that send it by id (`visible(..., files=provider)`); raises
        BlobNotFoundError, InvalidOperationError."""
        self._attachments.record_file_id(tenant, sha256, provider, file_id)

    def blob(self, sha256: str, *, tenant: str | None = None) -> StoredBlob:
        """A stored attachment's bytes and what is known of them; raises BlobNotFoundError
        when the tenant holds no such blob."""
        found = self._attachments.fetch(tenant, sha256)
        if found is None:
            raise BlobNotFoundError(f"no blob sha256:{sha256[:64]!r}")
        return found

    def build_prompt(
        self, context_id: UUID | str, budget: int, strategy: Strategy | None = None, *,
        query: str | None = None, resources: Sequence[Resource | JSON] = (),
        safety: float | None = None, at_version: int | None = None,
        similarity: Similarity | None = None,
    ) -> Prompt:  # fmt: skip
        """What to send under `budget` tokens: messages, total, and what was left out and why.

        Resources are optional items ({"id", "tokens" or "text", "priority"}) packed into
        what the messages leave. Raises PromptDoesNotFitError, InvalidOperationError.
        """
        cid = self._core.id(context_id)
        built = reads.prompt(
            self._core, cid, budget, strategy, query=query,
            resources=resources, safety=safety, at_version=at_version, similarity=similarity,
        )  # fmt: skip
        # What is sent holds the attachments' data: a model cannot read a reference.
        messages = self._attachments.readable(
            self._core.tenant_of(cid), built.messages, inline=True
        )
        return built.model_copy(update={"messages": messages})

    def batches(self, context_id: UUID | str) -> list[BatchFrame]:
        """The open batches above batch 0, lowest first."""
        return reads.batches(self._core, self._core.id(context_id))

    def history(
        self, context_id: UUID | str, *, types: Sequence[str] | None = None,
        actor: str | None = None, from_version: int | None = None,
        to_version: int | None = None, changes: bool = False,
    ) -> list[HistoryEntry]:  # fmt: skip
        """Every event of a context in order, with rollbacks marking what they reverted.

        With `changes`, each entry also says what it changed in the visible context.
        """
        cid = self._core.id(context_id)
        return self._history.read(cid, lambda core: reads.history(
            core, cid, types=types, actor=actor,
            from_version=from_version, to_version=to_version, changes=changes,
        ))  # fmt: skip

    def token_series(self, context_id: UUID | str, *, points: int = 500) -> TokenSeries:
        """Visible tokens over every version (thinned to at most `points`), with the
        compactions and rollbacks marked: what a chart of the context's size needs."""
        cid = self._core.id(context_id)
        return self._history.read(cid, lambda core: reads.tokens_over_versions(core, cid, points))

    def context_for_key(
        self, key: str, *, tenant: str | None = None, name: str | None = None,
        metadata: JSON | None = None, actor: str | None = None,
    ) -> UUID:  # fmt: skip
        """The context a caller's own key names (a session id, a thread id), created on
        first use. The id is derived from (tenant, key), so every process and service
        instance finds the same context, and two tenants' equal keys never meet."""
        cid = key_context_id(key, tenant)
        if not self._core.knows(cid) and not self._core.exists(cid):
            with suppress(ContextExistsError):  # another writer created it first
                self.create(
                    name=key if name is None else name, metadata=metadata, actor=actor,
                    tenant=tenant, context_id=cid,
                )  # fmt: skip
        if self._core.tenant_of(cid) != tenant:  # someone chose this id on purpose: never share it
            raise ContextExistsError(f"the context of key {key!r} was taken by another owner")
        return cid

    def lookup_key(self, key: str, *, tenant: str | None = None) -> UUID | None:
        """The context a caller's own key names, if it was created (context_for_key
        creates it); None otherwise. Creates nothing."""
        cid = key_context_id(key, tenant)
        if not self._core.knows(cid) and not self._core.exists(cid):
            return None
        return cid if self._core.tenant_of(cid) == tenant else None

    def contexts(
        self, *, limit: int = 1000, tenant: str | None = None, search: str | None = None,
        after: UUID | str | None = None,
    ) -> list[ContextSummary]:  # fmt: skip
        """Contexts in the order they were created; `tenant` keeps one tenant's, `search`
        those whose name or id contains it (any case); `after` pages on from the context
        listed last (its id)."""
        start = check_page(limit, after)
        events = self._core.all_of(Context.ContextCreated, Context.ContextForked)
        seen = self._core.cache.remember_tenant
        found = list_contexts(
            events, limit=limit, tenant=tenant, search=search, seen=seen, after=start
        )
        return sweeping.unexpired(self._core, found)

    def search(
        self, query: str, *, tenant: str | None = None,
        context_ids: Sequence[UUID | str] | None = None, roles: Sequence[str] | None = None,
        since: datetime | None = None, until: datetime | None = None,
        include_hidden: bool = False, limit: int = 20, cursor: str | None = None,
    ) -> SearchPage:  # fmt: skip
        """The messages across contexts (of `tenant`, when given) matching `query`, best
        first, a page of `limit` at a time (`cursor`: the previous page's). Every word must
        match, in any order; "quoted phrases" as phrases; case and accents aside; Chinese,
        Japanese and Korean by any substring of two or more characters. Only what each
        context shows now, unless `include_hidden` (deleted, replaced, compressed and rolled
        back messages too: `visible=False`). Raises InvalidOperationError for an empty
        query, a bad filter or a cursor of another search."""
        from ctxstore.adapters.store import search as searching

        return searching.search(
            self._core, query, tenant=tenant, context_ids=context_ids, roles=roles,
            since=since, until=until, include_hidden=include_hidden, limit=limit, cursor=cursor,
        )  # fmt: skip

    @staticmethod
    def context_uuid(context_id: UUID | str) -> UUID:
        """A context id from a UUID or its text; raises ContextNotFoundError."""
        return StoreCore.id(context_id)

    # ---- the service's storage ------------------------------------------------------

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        """Whether `close` has been called (a closed store's methods fail)."""
        return self._core.closed

    def close(self) -> None:
        from ctxstore.adapters.capture.recorder import close_recorder

        close_recorder(self)  # calls captured for this store are recorded first (bounded)
        if self._replicas is not None:
            self._replicas.close()
        self._core.close()


if TYPE_CHECKING:  # the type checker fails here when the facade and the contract part

    def _offers_the_contract(store: ContextStore) -> ContextOperations:
        return store
