"""ContextStore: the eventsourcing application behind the Python facade.

Writes use an in-process cache of aggregates without re-reading the database first:
a racing writer elsewhere makes the save fail on the (context, version) key, and the
command is then retried on fresh state (or reported, when the caller named a version).
Reads catch the cached aggregate up with one query, or load the nearest snapshot.
"""

from __future__ import annotations

import copy
import json
import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import datetime
from typing import TYPE_CHECKING, Any, Self, cast
from uuid import UUID, uuid5

import psycopg
from eventsourcing.application import AggregateNotFoundError, Application, LRUCache
from eventsourcing.persistence import IntegrityError, Mapper, PersistenceError, Transcoder
from eventsourcing.postgres import PostgresApplicationRecorder
from eventsourcing.utils import Environment, get_topic
from pydantic import BaseModel, ConfigDict

from ctxstore.adapters.llm.summarizers import ExtractiveSummarizer, OpenAISummarizer
from ctxstore.adapters.llm.tokenizer import Tokenizers, check_encoding_name
from ctxstore.adapters.settings import Settings, library_env, redact
from ctxstore.adapters.storage.audit_index import (
    AuditView,
    OrderedPostgresRecorder,
    audit_view,
    binary_snapshot_inserts,
)
from ctxstore.adapters.storage.codec.chain import (
    GENESIS,
    ChainingMapper,
    Verification,
    anchor,
    unseal,
)
from ctxstore.adapters.storage.codec.compression import compressor
from ctxstore.adapters.storage.codec.transcoder import ContextTranscoder
from ctxstore.adapters.storage.postgres import tune_tables
from ctxstore.adapters.storage.snapshot_policy import held_messages, prune_superseded
from ctxstore.adapters.storage.snapshot_policy import step as snapshot_step
from ctxstore.adapters.storage.snapshot_store import SnapshotStore
from ctxstore.adapters.storage.turns import TURN_HELD, Turn, Turns
from ctxstore.domain.compaction import Entry, NothingToSummarizeError, plan_compaction
from ctxstore.domain.context import JSON, Context, MessageRef
from ctxstore.domain.errors import (
    ContextExistsError,
    ContextNotFoundError,
    CtxStoreError,
    InvalidOperationError,
    LimitExceededError,
    StoreUnavailableError,
    VersionConflictError,
)
from ctxstore.domain.messages import Message, json_problem, json_size_bound
from ctxstore.domain.packing import Resource
from ctxstore.domain.prompt import (
    Prompt,
    PromptItem,
    PromptUnits,
    Similarity,
    Strategy,
    build_prompt,
    lexical_similarity,
    prompt_units,
)
from ctxstore.domain.summarize import ALGORITHM, Summarizer, summarize_with_bisect
from ctxstore.domain.tokens import REPLY_PRIMING, TextCounter, message_tokens
from ctxstore.projections.audit import AuditPage
from ctxstore.projections.changes import Diff
from ctxstore.projections.history import HistoryEntry, event_type_filter, fold_history
from ctxstore.projections.tokens import MAX_POINTS, Folded, TokenSeries, fold_tokens, token_series
from ctxstore.projections.usage import ModelUsage, usage_by_model
from ctxstore.projections.visible import BatchFrame, VisibleContext, batch_stack, visible_of

if TYPE_CHECKING:
    from ctxstore.adapters.store.debug import ModelCall, ReplayStep
    from ctxstore.adapters.store.erasure import Erasure

log = logging.getLogger(__name__)
KEY_NAMESPACE = UUID("6d1f3c52-8a0e-4c59-9d2b-7f4e0b1a2c3d")  # ids of keyed contexts
MAX_ATTEMPTS = 50  # a command retried this often against racing writers gives up
SCHEMA_LOCK = 0x63747873  # advisory lock key: one process at a time creates the tables
# PostgreSQL tables of a store, the events table first: the library's, the audit index's,
# erasure records and the HTTP service's idempotency keys (an owner's store creates them all).
STORE_TABLES = (
    "ctxstore_events", "ctxstore_snapshots", "ctxstore_audit", "ctxstore_audit_tracking",
    "ctxstore_erasures", "ctxstore_idempotency",
)  # fmt: skip
PARSED_CACHE_SIZE = 200_000  # validated messages kept per store


@contextmanager
def schema_lock(env: dict[str, str]) -> Iterator[psycopg.Connection[Any] | None]:
    """On PostgreSQL, hold an advisory lock while the library creates tables and functions;
    yields the connection holding it (None elsewhere).

    Processes starting together would otherwise race: PostgreSQL refuses concurrent
    CREATE OR REPLACE FUNCTION ("tuple concurrently updated") and CREATE TABLE IF NOT EXISTS.
    """
    if env.get("PERSISTENCE_MODULE") != "eventsourcing.postgres":
        yield None
        return
    with psycopg.connect(
        dbname=env["POSTGRES_DBNAME"],
        host=env["POSTGRES_HOST"],
        port=env["POSTGRES_PORT"],
        user=env["POSTGRES_USER"],
        password=env["POSTGRES_PASSWORD"] or None,
        connect_timeout=int(env.get("POSTGRES_CONNECT_TIMEOUT", "10")),
        autocommit=True,
    ) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (SCHEMA_LOCK,))
        try:
            yield conn
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (SCHEMA_LOCK,))


def provisioned_elsewhere(conn: psycopg.Connection[Any], schema: str) -> bool:
    """Whether the store's tables exist and belong to another role: a deployment whose
    schema its owner created (and upgrades), used by a role granted only the tables. Such
    a store opens without running DDL, which only the owner may; raises StoreUnavailable-
    Error naming the tables that role would need and cannot create."""
    rows = conn.execute(
        "SELECT t.name, pg_has_role(c.relowner, 'USAGE') FROM unnest(%s::text[]) AS t(name) "
        "LEFT JOIN pg_namespace n ON n.nspname = %s "
        "LEFT JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = t.name",
        (list(STORE_TABLES), schema),
    ).fetchall()
    owned = {name: owner for name, owner in rows}
    if owned[STORE_TABLES[0]] is not False:  # missing, or ours: create and upgrade as usual
        return False
    missing = [name for name, owner in owned.items() if owner is None]
    if missing:
        raise StoreUnavailableError(
            f"the store's tables {', '.join(missing)} are missing in schema {schema!r}, and "
            "this role does not own the others: open the store once as their owner, who "
            "creates them"
        )
    return True


class Written(BaseModel):
    """What a command wrote: the ids it touched, the context's new version and batch."""

    model_config = ConfigDict(frozen=True)

    context_id: UUID
    version: int
    batch: int
    ids: list[str]
    tokens: int  # what the visible context now costs in a prompt
    messages: int  # how many messages are visible


class Compaction(BaseModel):
    """What a compaction planned and, unless skipped or a dry run, wrote."""

    model_config = ConfigDict(frozen=True)

    context_id: UUID
    trigger: str
    plan: dict[str, Any]
    replaced: list[str]  # the visible messages the summary took the place of
    skipped: str | None = None
    dry_run: bool = False
    summary_id: str | None = None
    version: int | None = None  # the context's version after the compaction
    batch: int | None = None
    tokens_before: int | None = None  # visible tokens before and after
    tokens_after: int | None = None
    stats: dict[str, Any] = {}


class ContextSummary(BaseModel):
    """A context as listed: id, name, creation time and creator."""

    model_config = ConfigDict(frozen=True)

    context_id: UUID
    name: str | None
    created_at: datetime
    created_by: str
    forked_from: dict[str, Any] | None = None  # {"context_id", "version"} of a fork's source
    tenant: str | None = None


class ContextStore(Application[UUID]):
    """Stores contexts as event streams; every public method is one command or one read."""

    name = "ctxstore"

    def __init__(
        self, env: dict[str, str], settings: Settings | None = None, *, url: str = ""
    ) -> None:
        self.settings = settings or Settings()
        self.url = url
        super().__init__(env)
        self._cache: LRUCache[UUID, Context] = LRUCache(maxsize=self.settings.cache_size)
        self.tokenizers = Tokenizers(self.settings.tiktoken_cache_dir)
        # Stored messages never change in place: (context, id, version) names one for good.
        self._parsed: dict[UUID, dict[str, tuple[int, PromptItem]]] = {}
        self._parsed_count = 0
        self._units: dict[UUID, tuple[int, PromptUnits]] = {}  # head version -> grouped units
        self._locks: dict[UUID, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        self._chain_heads: dict[UUID, tuple[int, str]] = {}  # context -> (version, chain)
        self._turns = Turns(self.recorder)  # contended contexts' writers take turns
        self._tenants: dict[UUID, str | None] = {}
        # Token series folded so far: a later call folds only the newer events.
        self._series: dict[UUID, Folded] = {}
        self._series_lock = threading.Lock()
        if self.snapshots is not None:
            binary_snapshot_inserts(self.snapshots.recorder)
        # False: a role that does not own the tables opened the store (provisioned_elsewhere)
        # and runs no DDL; the library's switch says so, and ours follow it.
        self.creates_tables = env.get("CREATE_TABLE", "y") != "n"
        if self.creates_tables:
            tune_tables(self.recorder, self.snapshots.recorder if self.snapshots else None)
        self.audit_index: AuditView = audit_view(self.recorder, create=self.creates_tables)
        if self.creates_tables and isinstance(self.recorder, PostgresApplicationRecorder):
            from ctxstore.adapters.store.erasure import eraser

            eraser(self)  # its tables too, which a role that does not own the schema cannot make
        if self.audit_index.needs_rebuild():
            # Dropped, truncated, or its position moved: rebuilt from events when next read.
            log.warning("the audit index disagrees with its tracked position; rebuilding it")
            self.audit_index.reset()

    @classmethod
    def from_url(cls, url: str | None = None, settings: Settings | None = None) -> ContextStore:
        """Open the store at `url`, else CTXSTORE_URL, else the embedded SQLite file."""
        settings = settings or Settings()
        resolved = url or settings.resolved_url()
        env = {**library_env(resolved, settings.connect_timeout), **settings.at_rest()}
        try:
            with schema_lock(env) as conn:
                schema = env.get("POSTGRES_SCHEMA", "").strip() or "public"  # as the library
                if conn is not None and provisioned_elsewhere(conn, schema):
                    env["CREATE_TABLE"] = "n"  # the library's switch; ours follow it
                store = cls(env, settings, url=resolved)
        except (PersistenceError, psycopg.Error, OSError) as exc:
            raise StoreUnavailableError(
                f"cannot open the store at {redact(resolved)}: {exc}"
            ) from exc
        store.check_readable()
        return store

    def check_readable(self) -> None:
        """Read the newest stored event: a store written with another encryption key (or
        none) fails here, clearly, not on some later read; compression never does."""
        last = self.recorder.max_notification_id()
        found = self.recorder.select_notifications(last or 1, 1) if last else []
        try:
            for n in found:
                self.mapper.to_domain_event(n)
        except ValueError as exc:  # undecryptable, undecompressible, unparsable
            self.close()
            raise StoreUnavailableError(
                f"cannot read the events stored at {redact(self.url)} with these settings: "
                "check CTXSTORE_ENCRYPTION_KEY "
                f"({type(exc).__name__})"
            ) from None

    def construct_transcoder(self) -> Transcoder:
        return ContextTranscoder()

    def construct_mapper(self) -> Mapper[UUID]:
        # The cipher as the library's factory sets it; our compressor reads every form.
        plain: Mapper[UUID] = self.factory.mapper(transcoder=self.construct_transcoder())
        return ChainingMapper(plain.transcoder, compressor(self.settings.compress), plain.cipher)

    def construct_snapshot_store(self) -> SnapshotStore:
        # Snapshots name the events holding their messages (adapters/storage/snapshot_store.py).
        library = super().construct_snapshot_store()
        return SnapshotStore(library.mapper, library.recorder, self.recorder)

    def construct_env(self, name: str, env: dict[str, str] | None = None) -> Environment:  # type: ignore[override]
        # Only our settings configure the library: it would otherwise read os.environ.
        return Environment(name, {"IS_SNAPSHOTTING_ENABLED": "y", **(env or {})})

    # ---- commands -------------------------------------------------------------------

    def create(
        self,
        *,
        name: str | None = None,
        metadata: JSON | None = None,
        encoding: str | None = None,
        actor: str | None = None,
        tenant: str | None = None,
        context_id: UUID | str | None = None,
    ) -> UUID:
        """Create an empty context counting tokens with `encoding`; returns its id.

        `tenant` names its owner on a shared service (the HTTP service sets it). A caller
        may choose the id (e.g. derived from its own session key); raises ContextExistsError
        when that id is taken.
        """
        enc = check_encoding_name(encoding or self.settings.encoding)
        chosen = None
        if context_id is not None:
            try:
                chosen = context_id if isinstance(context_id, UUID) else UUID(str(context_id))
            except ValueError:
                raise InvalidOperationError(
                    f"context_id is not a UUID: {context_id!r:.80}"
                ) from None
        ctx = Context.start(
            name=name, metadata=metadata, encoding=enc, actor=self._actor(actor), tenant=tenant,
            context_id=chosen,
        )  # fmt: skip
        try:
            self._put(ctx.id, 0, ctx.collect_events())
        except IntegrityError:
            raise ContextExistsError(f"context {ctx.id} already exists") from None
        self._cache.put(ctx.id, ctx)
        return ctx.id

    def insert(
        self,
        context_id: UUID | str,
        messages: Message | JSON | Sequence[Message | JSON],
        *,
        after: MessageRef | None = None,
        actor: str | None = None,
        expected_version: int | None = None,
    ) -> Written:
        """Append messages, or place them after a visible message (id or position).

        Raises: ContextNotFoundError, InvalidMessageError, UnknownMessageError,
        MalformedTranscriptError, VersionConflictError.
        """
        who = self._actor(actor)
        batch: Any = [messages] if isinstance(messages, Message | dict) else messages
        if isinstance(batch, list | tuple):
            self._check_sizes(batch)  # anything else: the domain names what is wrong

        def command(c: Context) -> list[str]:
            self._check_count(c, len(batch) if isinstance(batch, list | tuple) else 1)
            return c.insert(batch, after=after, actor=who, counter=self._counter(c))

        written = self._command(context_id, expected_version, command)
        if self.settings.compaction.auto and self._crossed(written.tokens, written.messages):
            self._compact_proactively(written.context_id, who)
        return written

    def delete(
        self,
        context_id: UUID | str,
        ids: MessageRef | Sequence[MessageRef],
        *,
        actor: str | None = None,
        expected_version: int | None = None,
    ) -> Written:
        """Hide visible messages; a tool call and its results go together or not at all."""
        who = self._actor(actor)
        return self._command(context_id, expected_version, lambda c: c.delete(ids, actor=who))

    def replace(
        self,
        context_id: UUID | str,
        message_id: MessageRef,
        message: Message | JSON | str,
        *,
        actor: str | None = None,
        expected_version: int | None = None,
    ) -> Written:
        """Give a visible message new content under the same id (a string: new text only)."""
        who = self._actor(actor)
        if not isinstance(message, str):
            self._check_sizes([message])
        return self._command(
            context_id,
            expected_version,
            lambda c: c.replace(message_id, message, actor=who, counter=self._counter(c)),
        )

    def compress(
        self,
        context_id: UUID | str,
        ids: MessageRef | Sequence[MessageRef],
        summary: Message | JSON | str,
        *,
        stats: JSON | None = None,
        actor: str | None = None,
        expected_version: int | None = None,
    ) -> Written:
        """Put one summary in place of a contiguous run of visible messages.

        A plain string becomes a user message marked as a summary in its metadata.
        """
        who = self._actor(actor)
        if isinstance(summary, str):
            summary = {"role": "user", "content": summary, "metadata": {"ctxstore": "summary"}}
        self._check_sizes([summary])
        return self._command(
            context_id,
            expected_version,
            lambda c: c.compress(ids, summary, stats=stats, actor=who, counter=self._counter(c)),
        )

    def batch_start(
        self,
        context_id: UUID | str,
        *,
        actor: str | None = None,
        expected_version: int | None = None,
    ) -> Written:
        """Open batch n+1 on top of the current batch n."""
        who = self._actor(actor)
        return self._command(context_id, expected_version, lambda c: c.batch_start(actor=who))

    def batch_end(
        self,
        context_id: UUID | str,
        to: int | None = None,
        *,
        keep: bool = False,
        actor: str | None = None,
        expected_version: int | None = None,
    ) -> Written:
        """Close the batches above `to` (default: the top one), rolling back unless keep."""
        who = self._actor(actor)
        return self._command(
            context_id,
            expected_version,
            lambda c: c.batch_end(to=to, keep=keep, actor=who),
        )

    def record_usage(
        self,
        context_id: UUID | str,
        *,
        model: str,
        prompt_tokens: int,
        completion_tokens: int = 0,
        version: int | None = None,
        counted_tokens: int | None = None,
        prompt: Prompt | None = None,
        sent: Sequence[str | Message | JSON] | None = None,
        actor: str | None = None,
    ) -> Written:
        """Record what a provider billed for a call made with the context at `version`.

        Give the `prompt` you sent (from build_prompt) or the messages `sent` (ids of visible
        messages, or messages) so that `call()` can show exactly what the model saw; else the
        whole visible context counts as sent. `version` defaults to the prompt's, else the
        head; `counted_tokens` to the prompt's total, else ctxstore's count of the context.
        """
        from ctxstore.adapters.store.debug import sent_items

        who = self._actor(actor)
        cid = self._id(context_id)
        if prompt is not None:
            if not isinstance(prompt, Prompt):
                raise InvalidOperationError(f"prompt must be a Prompt, got {type(prompt).__name__}")
            version = prompt.version if version is None else version
            counted_tokens = prompt.tokens if counted_tokens is None else counted_tokens
        at_sent = None if version is None else self._context_at(cid, version)
        items = None
        if prompt is not None or sent is not None:
            # The named messages are checked against the version that was sent.
            at_sent = at_sent or self._get(cid)
            items = sent_items(at_sent, prompt, sent)

        def command(c: Context) -> list[str]:
            at = at_sent or c
            c.record_usage(
                for_version=at.version,
                model=model,
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                counted_tokens=at.tokens + REPLY_PRIMING
                if counted_tokens is None
                else counted_tokens,
                estimated=at.estimated > 0,
                sent=items,
                actor=who,
            )
            return []

        return self._command(cid, None, command)

    def usage_report(
        self, *, model: str | None = None, context_id: UUID | str | None = None
    ) -> list[ModelUsage]:
        """Per model: the provider's prompt tokens against ctxstore's counts, across contexts."""
        if context_id is not None:
            events: Iterable[Context.Event] = self._events(self._id(context_id))
        else:
            events = self._all_of(Context.UsageRecorded)
        usage = [e for e in events if isinstance(e, Context.UsageRecorded)]
        return usage_by_model(e for e in usage if model is None or e.model == model)

    def _all_of(self, *event_classes: type[Context.Event]) -> Iterator[Context.Event]:
        """Every stored event of some types, across contexts, in the order recorded."""
        topics = [get_topic(c) for c in event_classes]
        start = 1
        while True:
            page = self.recorder.select_notifications(start, 500, topics=topics)
            if not page:
                return
            for n in page:
                yield cast(Context.Event, self.mapper.to_domain_event(n))
            start = page[-1].id + 1

    def compact(
        self,
        context_id: UUID | str,
        *,
        trigger: str = "manual",
        dry_run: bool = False,
        summarizer: Summarizer | None = None,
        in_batch: bool | None = None,
        actor: str | None = None,
    ) -> Compaction:
        """Summarize the older half of the rounds since the latest summary (seeds 000, 001).

        Writes one batch_start (unless in_batch=False) and one compress, together; a failed
        summarization writes nothing. Raises NothingToSummarizeError, and whatever the
        summarizer raises that is not a context overflow.
        """
        who = self._actor(actor)
        cid = self._id(context_id)
        cfg = self.settings.compaction
        writer = summarizer or self.summarizer()
        batch = cfg.in_batch if in_batch is None else in_batch
        for _ in range(MAX_ATTEMPTS):
            with self._lock(cid):
                ctx = self._fresh(cid)
                version, before = ctx.version, ctx.tokens + REPLY_PRIMING
                entries = [
                    Entry(
                        i,
                        ctx.entries[i]["message"]["role"],
                        ctx.entries[i]["summary_of"] is not None,
                    )
                    for i in ctx.order
                ]
                by_id = {item.message.id: item.message for item in self._prompt_items(ctx)}
            plan = plan_compaction(entries, min_rounds=cfg.min_rounds)
            base = {
                "context_id": cid,
                "trigger": trigger,
                "plan": plan.as_dict(),
                "replaced": plan.summarize,
            }
            if plan.skipped is not None or dry_run:
                return Compaction(
                    **base, skipped=plan.skipped, dry_run=dry_run, tokens_before=before
                )
            result = summarize_with_bisect(
                [by_id[i] for i in plan.summarize],
                writer,
                target_tokens=cfg.target_tokens,
                max_depth=cfg.max_depth,
                min_chunk_messages=cfg.min_chunk_messages,
            )
            stats = {
                "algorithm": ALGORITHM,
                "trigger": trigger,
                "chunk_count": result.chunks,
                "max_depth": result.depth,
                "truncated": result.truncated,
                "summarizer_calls": result.calls,
                "summarizer": {
                    "name": writer.name,
                    "model": writer.model,
                    "prompt_version": writer.prompt_version,
                },
                "planner": plan.as_dict(),
                "tokens_before_visible": before,
            }
            summary = {"role": "user", "content": result.text, "metadata": {"ctxstore": "summary"}}

            def write(
                c: Context,
                ids: list[str] = plan.summarize,
                text: JSON = summary,
                facts: JSON = stats,
            ) -> str:
                if batch:
                    c.batch_start(actor=who)
                return c.compress(ids, text, stats=facts, actor=who, counter=self._counter(c))

            try:
                w = self._command(cid, version, write)
            except VersionConflictError:
                continue  # the context moved while the summary was written: plan again
            return Compaction(
                **base, summary_id=w.ids[0], version=w.version, batch=w.batch,
                tokens_before=before, tokens_after=w.tokens, stats=stats,
            )  # fmt: skip
        raise VersionConflictError(
            f"context {cid}: kept changing during {MAX_ATTEMPTS} compactions"
        )

    def maybe_compact(
        self, context_id: UUID | str, *, actor: str | None = None
    ) -> Compaction | None:
        """Compact proactively if the visible context crossed a configured threshold."""
        cid = self._id(context_id)
        if not self._crossed(*self._head_size(cid)):
            return None
        return self._compact_proactively(cid, actor)

    def _crossed(self, tokens: int, messages: int) -> bool:
        cfg = self.settings.compaction
        return tokens >= cfg.max_context_tokens or messages >= cfg.message_limit

    def _compact_proactively(self, cid: UUID, actor: str | None) -> Compaction | None:
        try:
            done = self.compact(cid, trigger="proactive", actor=actor)
        except NothingToSummarizeError:
            return None
        return None if done.skipped else done

    def _head_size(self, cid: UUID) -> tuple[int, int]:
        """The visible context's prompt tokens and message count, without building it."""
        with self._lock(cid):
            ctx = self._fresh(cid)
            return ctx.tokens + REPLY_PRIMING, len(ctx.order)

    def recover_from_overflow(
        self,
        context_id: UUID | str,
        budget: int,
        strategy: Strategy | None = None,
        *,
        actor: str | None = None,
        **prompt: Any,
    ) -> Prompt:
        """After a model request failed with a context overflow: compact, then the prompt to retry.

        Compacts (trigger overflow_retry) while the visible context exceeds the budget's limit
        and there is something left to summarize, then builds the prompt, which always fits.
        Raises PromptDoesNotFitError when even the messages that must be sent do not fit.
        """
        cid = self._id(context_id)
        safety = prompt.get("safety") or self.settings.prompt.safety
        for _ in range(3):
            if self._head_size(cid)[0] <= int(budget * safety):
                break
            try:
                done = self.compact(cid, trigger="overflow_retry", actor=actor)
            except NothingToSummarizeError:
                break
            if done.skipped:
                break
        return self.build_prompt(cid, budget, strategy, **prompt)

    def summarizer(self) -> Summarizer:
        """The configured summarizer: offline extractive by default, or an OpenAI-compatible model."""
        cfg = self.settings.compaction
        if cfg.summarizer == "openai":
            return OpenAISummarizer(cfg.model, base_url=cfg.base_url, api_key=cfg.api_key)
        return ExtractiveSummarizer(self.tokenizers.counter(self.settings.encoding))

    # ---- reads ------------------------------------------------------------------------

    def visible(
        self,
        context_id: UUID | str,
        *,
        at_version: int | None = None,
        at_time: datetime | None = None,
    ) -> VisibleContext:
        """The visible context now, at a past version, or as it was at a time."""
        cid = self._id(context_id)
        if at_time is not None:
            if at_version is not None:
                raise InvalidOperationError("give at_version or at_time, not both")
            at_version = self._version_at_time(cid, at_time)
        if at_version is None:
            with self._lock(cid):
                ctx = self._fresh(cid)
                return visible_of(ctx, [i.message for i in self._prompt_items(ctx)])
        ctx = self._context_at(cid, at_version)
        return visible_of(ctx, [i.message for i in self._prompt_items(ctx)])

    def visible_messages(self, context_id: UUID | str, *, last: int | None = None) -> list[JSON]:
        """The visible messages as stored JSON (copies), or only the newest `last`: a
        session's latest items without building the whole visible context."""
        cid = self._id(context_id)
        with self._lock(cid):
            ctx = self._fresh(cid)
            order = ctx.order if last is None else ctx.order[-last:] if last > 0 else []
            return [copy.deepcopy(ctx.entries[i]["message"]) for i in order]

    def _context_at(self, cid: UUID, at_version: int) -> Context:
        if isinstance(at_version, bool) or not isinstance(at_version, int) or at_version < 1:
            raise InvalidOperationError(
                f"at_version must be a positive integer, got {at_version!r}"
            )
        ctx = self._get(cid, version=at_version)
        if ctx.version < at_version:
            raise InvalidOperationError(
                f"context {cid} has no version {at_version}; its head is version {ctx.version}"
            )
        return ctx

    def build_prompt(
        self,
        context_id: UUID | str,
        budget: int,
        strategy: Strategy | None = None,
        *,
        query: str | None = None,
        resources: Sequence[Resource | JSON] = (),
        safety: float | None = None,
        at_version: int | None = None,
        similarity: Similarity | None = None,
    ) -> Prompt:
        """What to send under `budget` tokens: messages, total, and what was left out and why.

        Resources are optional items ({"id", "tokens" or "text", "priority"}) packed into
        what the messages leave. Raises PromptDoesNotFitError, InvalidOperationError.
        """
        cid = self._id(context_id)
        config = self.settings.prompt
        if safety is not None:
            if (
                isinstance(safety, bool)
                or not isinstance(safety, int | float)
                or not 0 < safety <= 1
            ):
                raise InvalidOperationError(f"safety must be in (0, 1], got {safety!r}")
            config = config.model_copy(update={"safety": float(safety)})
        if at_version is None:
            with self._lock(cid):
                ctx = self._fresh(cid)
                cached = self._units.get(cid)
                if cached is None or cached[0] != ctx.version:
                    if len(self._units) >= self.settings.cache_size:
                        self._units.clear()
                    # Grouping 10,000 messages costs about as much as choosing among them:
                    # do it once per version of the context.
                    cached = self._units[cid] = (ctx.version, prompt_units(self._prompt_items(ctx)))
                units = cached[1]
        else:
            ctx = self._context_at(cid, at_version)
            units = prompt_units(self._prompt_items(ctx))
        counter = self._counter(ctx)
        prompt = build_prompt(
            units,
            budget,
            count=lambda m: message_tokens(m.model_dump(mode="json"), counter),
            config=config,
            strategy=strategy,
            query=query,
            resources=[self._resource(r, counter) for r in resources],
            similarity=similarity or lexical_similarity,
            estimated=ctx.estimated > 0 or not counter.exact,
        )
        return prompt.model_copy(update={"version": ctx.version})

    def _prompt_items(self, ctx: Context) -> list[PromptItem]:
        """The visible messages as validated models with their counts, remembered."""
        known = self._parsed.get(ctx.id)
        if known is None:
            if self._parsed_count >= PARSED_CACHE_SIZE:
                self._parsed.clear()
                self._parsed_count = 0
            known = self._parsed[ctx.id] = {}
        items = []
        entries = ctx.entries
        for i in ctx.order:
            entry = entries[i]
            hit = known.get(i)
            if hit is None or hit[0] != entry["version"]:
                message = Message.model_validate(entry["message"])
                hit = (
                    entry["version"],
                    PromptItem(message, entry["tokens"], bool(entry["summary_of"])),
                )
                known[i] = hit
                self._parsed_count += 1
            items.append(hit[1])
        return items

    @staticmethod
    def _resource(raw: Resource | JSON, counter: TextCounter) -> Resource:
        if isinstance(raw, Resource):
            return raw
        if not isinstance(raw, dict) or not isinstance(raw.get("id"), str):
            raise InvalidOperationError(f"a resource needs an 'id' string, got {raw!r:.80}")
        tokens = raw.get("tokens")
        if tokens is None and isinstance(raw.get("text"), str):
            tokens = counter.count(raw["text"])
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
            raise InvalidOperationError(
                f"resource {raw['id']!r} needs 'tokens' (a count >= 0) or 'text'"
            )
        priority = raw.get("priority", 0)
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise InvalidOperationError(f"resource {raw['id']!r}: priority must be an integer")
        return Resource(raw["id"], tokens, priority)

    def batches(self, context_id: UUID | str) -> list[BatchFrame]:
        """The open batches above batch 0, lowest first."""
        cid = self._id(context_id)
        with self._lock(cid):
            return batch_stack(self._fresh(cid))

    def history(
        self,
        context_id: UUID | str,
        *,
        types: Sequence[str] | None = None,
        actor: str | None = None,
        from_version: int | None = None,
        to_version: int | None = None,
        changes: bool = False,
    ) -> list[HistoryEntry]:
        """Every event of a context in order, with rollbacks marking what they reverted.

        With `changes`, each entry also says what it changed in the visible context.
        """
        cid = self._id(context_id)
        types = event_type_filter(types)
        for name, bound in (("from_version", from_version), ("to_version", to_version)):
            if bound is not None and (isinstance(bound, bool) or not isinstance(bound, int)):
                raise InvalidOperationError(f"{name} must be an integer, got {bound!r}")
        entries = fold_history(self._events(cid), changes=changes)
        return [
            h
            for h in entries
            if (types is None or h.type in types)
            and (actor is None or h.actor == actor)
            and (from_version is None or h.version >= from_version)
            and (to_version is None or h.version <= to_version)
        ]

    def token_series(self, context_id: UUID | str, *, points: int = 500) -> TokenSeries:
        """Visible tokens over every version (thinned to at most `points`), with the
        compactions and rollbacks marked: what a chart of the context's size needs."""
        if isinstance(points, bool) or not isinstance(points, int) or not 2 <= points <= MAX_POINTS:
            raise InvalidOperationError(
                f"points must be between 2 and {MAX_POINTS}, got {points!r}"
            )
        cid = self._id(context_id)
        with self._lock(cid):
            head = self._fresh(cid).version
        with self._series_lock:  # folds one at a time; never holds up the context's writers
            folded = self._series.get(cid)
            if folded is not None and folded.ctx.version > head:
                folded = None  # the cache is ahead of this process's view: start again
            done = 0 if folded is None else folded.ctx.version
            if head > done:
                folded = fold_tokens(self.events.get(cid, gt=done, lte=head), folded)  # type: ignore[arg-type]
            if folded is None:
                raise ContextNotFoundError(f"no context with id {cid}")
            if cid not in self._series and len(self._series) >= 8:
                self._series.clear()
            self._series[cid] = folded
            return token_series(cid, folded, points)

    def context_for_key(
        self,
        key: str,
        *,
        tenant: str | None = None,
        name: str | None = None,
        metadata: JSON | None = None,
        actor: str | None = None,
    ) -> UUID:
        """The context a caller's own key names (a session id, a thread id), created on first use.

        The id is derived from (tenant, key), so every process and service instance finds
        the same context, and two tenants' equal keys never meet.
        """
        if not isinstance(key, str) or not 0 < len(key) <= 500:
            raise InvalidOperationError(f"key must be a string of 1-500 chars, got {key!r:.80}")
        cid = uuid5(KEY_NAMESPACE, f"{tenant or ''}\x00{key}")
        if cid not in self._tenants and not self.exists(cid):
            with suppress(ContextExistsError):  # another writer created it first
                self.create(
                    name=key if name is None else name, metadata=metadata, actor=actor,
                    tenant=tenant, context_id=cid,
                )  # fmt: skip
        if self.tenant_of(cid) != tenant:  # someone chose this id on purpose: never share it
            raise ContextExistsError(f"the context of key {key!r} was taken by another owner")
        return cid

    def contexts(
        self, *, limit: int = 1000, tenant: str | None = None, search: str | None = None
    ) -> list[ContextSummary]:
        """Contexts in the order they were created (from the application sequence).

        `tenant` keeps one tenant's; `search` those whose name or id contains it (any case).
        """
        found: dict[UUID, ContextSummary] = {}
        needle = None if search is None else search.casefold()
        for e in self._all_of(Context.ContextCreated, Context.ContextForked):
            if isinstance(e, Context.ContextForked):
                known = found.get(e.originator_id)
                if known is not None:
                    origin = {"context_id": e.source_id, "version": e.source_version}
                    found[e.originator_id] = known.model_copy(update={"forked_from": origin})
                continue
            if len(found) >= limit:
                break
            assert isinstance(e, Context.ContextCreated)
            self.remember_tenant(e.originator_id, e.tenant)
            if tenant is not None and e.tenant != tenant:
                continue
            if needle is not None and needle not in f"{e.name or ''} {e.originator_id}".casefold():
                continue
            found[e.originator_id] = ContextSummary(
                context_id=e.originator_id,
                name=e.name,
                created_at=e.timestamp,
                created_by=e.actor,
                tenant=e.tenant,
            )
        return list(found.values())

    # ---- audit and debugging (adapters/store/audit.py, debug.py, transfer.py) ---------------

    def audit(
        self,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        types: Sequence[str] | None = None,
        actor: str | None = None,
        context_id: UUID | str | None = None,
        tenant: str | None = None,
        after: int = 0,
        limit: int = 100,
        from_version: int | None = None,
        to_version: int | None = None,
    ) -> AuditPage:
        """Events across contexts after position `after`, in the order recorded.

        Filters: a time range (since inclusive, until exclusive), event types, actor and
        context, and with a context a window of its versions (both inclusive). Pass the
        page's `cursor` back as `after` for the next page, or later to follow new events.
        Raises InvalidOperationError.
        """
        from ctxstore.adapters.store.audit import audit_page

        return audit_page(
            self, since=since, until=until, types=types, actor=actor,
            context_id=context_id, tenant=tenant, after=after, limit=limit,
            from_version=from_version, to_version=to_version,
        )  # fmt: skip

    def verify(self, context_id: UUID | str | None = None) -> Verification:
        """Check the hash chain of one context, or of all; names each first broken link."""
        from ctxstore.adapters.store.audit import verify

        return verify(self, context_id)

    def diff(self, context_id: UUID | str, from_version: int, to_version: int) -> Diff:
        """Messages added, removed and changed between two versions, and the token delta."""
        from ctxstore.adapters.store.debug import diff

        return diff(self, context_id, from_version, to_version)

    def replay(
        self, context_id: UUID | str, *, from_version: int = 1, to_version: int | None = None
    ) -> Iterator[ReplayStep]:
        """(event, visible context after it, calls that sent it) for each event in the range."""
        from ctxstore.adapters.store.debug import replay

        return replay(self, context_id, from_version=from_version, to_version=to_version)

    def calls(self, context_id: UUID | str) -> list[ModelCall]:
        """The model calls recorded against a context, in order (numbered from 1)."""
        from ctxstore.adapters.store.debug import model_calls

        return model_calls(self, context_id)

    def call(self, context_id: UUID | str, number: int) -> ModelCall:
        """Recorded call `number` (1 the first, -1 the last) with exactly the messages sent."""
        from ctxstore.adapters.store.debug import model_calls

        return model_calls(self, context_id, number)[0]

    def fork(
        self,
        context_id: UUID | str,
        *,
        at_version: int | None = None,
        name: str | None = None,
        metadata: JSON | None = None,
        actor: str | None = None,
    ) -> UUID:
        """A new context that starts as a copy of this one's visible context (at a version)."""
        from ctxstore.adapters.store.debug import fork_context

        return fork_context(
            self, context_id, at_version=at_version, name=name, metadata=metadata,
            actor=self._actor(actor),
        )  # fmt: skip

    def export_events(self, context_id: UUID | str) -> Iterator[str]:
        """The context's events as JSON lines (ids, versions, timestamps and chains kept)."""
        from ctxstore.adapters.store.transfer import export_lines

        return export_lines(self, context_id)

    def import_events(
        self,
        lines: Iterable[str],
        *,
        new_id: bool = False,
        progress: Callable[[int, int], None] | None = None,
    ) -> UUID:
        """Store an exported context's events; returns its id. All or nothing.

        Raises InvalidImportError (naming the line), ContextExistsError.
        """
        from ctxstore.adapters.store.transfer import import_lines

        return import_lines(self, lines, new_id=new_id, progress=progress)

    def import_transcript(
        self,
        messages: str | Sequence[JSON],
        *,
        name: str | None = None,
        actor: str | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> UUID:
        """A new context from an OpenAI-format transcript (a list of messages, or its JSON /
        JSONL text); all messages or nothing."""
        from ctxstore.adapters.store.transfer import import_transcript, transcript_messages

        parsed = transcript_messages(messages) if isinstance(messages, str) else list(messages)
        return import_transcript(
            self, parsed, name=name, actor=self._actor(actor), progress=progress
        )

    # ---- helpers for those modules ------------------------------------------------------

    def context_uuid(self, context_id: UUID | str) -> UUID:
        return self._id(context_id)

    def context_events(self, cid: UUID) -> Iterator[Context.Event]:
        return self._events(cid)

    def context_at(self, cid: UUID, version: int) -> Context:
        """A private copy of the context at a version (from the nearest snapshot)."""
        return self._context_at(cid, version)

    def head(self, cid: UUID) -> Context:
        """A private copy of the context now."""
        return self._get(cid)

    def require_context(self, cid: UUID) -> None:
        self._get(cid)

    def tenant_of(self, context_id: UUID | str) -> str | None:
        """The tenant that owns a context (None: no tenant); raises ContextNotFoundError.

        A context's tenant never changes, so it is read once from its creation event.
        """
        cid = self._id(context_id)
        if cid in self._tenants:
            return self._tenants[cid]
        first = self.recorder.select_events(cid, lte=1, limit=1)
        if not first:
            raise ContextNotFoundError(f"no context with id {cid}")
        created = self.mapper.to_domain_event(first[0])
        assert isinstance(created, Context.ContextCreated)
        return self.remember_tenant(cid, created.tenant)

    def erase(self, context_id: UUID | str, *, reason: str, actor: str | None = None) -> Erasure:
        """Delete a context's contents for good (its events, snapshots, audit rows); leaves
        a record of the erasure, by whom and why. Raises ContextNotFoundError."""
        from ctxstore.adapters.store.audit import catch_up
        from ctxstore.adapters.store.erasure import erase_context

        catch_up(self)  # nothing of the context is left for the index to add afterwards
        return erase_context(self, context_id, actor=self._actor(actor), reason=reason)

    def rebuild_audit_index(self) -> int:
        """Rebuild the audit index from the events (after it was damaged); returns the
        position it reached."""
        from ctxstore.adapters.store.audit import catch_up

        self.audit_index.reset()
        return catch_up(self)

    def erasures(self) -> list[Erasure]:
        """The erasure records, oldest first."""
        from ctxstore.adapters.store.erasure import eraser

        return eraser(self).records()

    def forget(self, cid: UUID) -> None:
        """Drop everything this process keeps in memory about a context (after erasure)."""
        self._forget(cid)
        for kept in (self._parsed, self._units, self._tenants, self._series):
            kept.pop(cid, None)

    def remember_tenant(self, cid: UUID, tenant: str | None) -> str | None:
        if len(self._tenants) >= 100_000:
            self._tenants.clear()
        self._tenants[cid] = tenant
        return tenant

    def exists(self, cid: UUID) -> bool:
        return bool(self.recorder.select_events(cid, limit=1))

    def store_new(self, ctx: Context) -> None:
        """Store every event of a context not stored before, in one transaction."""
        self._put(ctx.id, 0, ctx.collect_events())
        self._remember_whole(ctx)

    def remember_import(self, ctx: Context, chain: str) -> None:
        """Note a context whose events an import stored, with its last chain."""
        self._chain_heads[ctx.id] = (ctx.version, chain)
        self._remember_whole(ctx)

    def _remember_whole(self, ctx: Context) -> None:
        """Cache a context stored whole, and snapshot it if that took many events."""
        self._cache.put(ctx.id, ctx)
        self._maybe_snapshot(ctx, 0)

    # ---- machinery --------------------------------------------------------------------

    def _check_sizes(self, messages: Sequence[Any]) -> None:
        """Refuse a message over CTXSTORE_MAX_MESSAGE_BYTES (its JSON, UTF-8) before work."""
        limit = self.settings.max_message_bytes
        for i, m in enumerate(messages):
            if isinstance(m, str):
                size = len(m.encode("utf-8", "surrogatepass"))
            elif isinstance(m, Message):
                size = len(m.model_dump_json(exclude_none=True).encode())
            elif (bound := json_size_bound(m)) is not None and bound <= limit:
                continue  # surely small enough: not worth encoding to measure
            else:
                try:
                    size = len(
                        json.dumps(m, ensure_ascii=False, default=str).encode(
                            "utf-8", "surrogatepass"
                        )
                    )
                except (TypeError, ValueError, RecursionError):
                    continue  # not storable JSON: validation names it
            if size > limit:
                raise LimitExceededError(
                    f"message {i} is {size} bytes; the limit is {limit} "
                    "(CTXSTORE_MAX_MESSAGE_BYTES)"
                )

    def _check_count(self, c: Context, adding: int) -> None:
        limit = self.settings.max_messages
        if len(c.order) + adding > limit:
            raise LimitExceededError(
                f"context {c.id} would hold {len(c.order) + adding} visible messages; the "
                f"limit is {limit} (CTXSTORE_MAX_MESSAGES); compact or delete first"
            )

    def _command(
        self,
        context_id: UUID | str,
        expected_version: int | None,
        command: Callable[[Context], list[str] | str | int | None],
    ) -> Written:
        """Run one aggregate command and store its events; the command returns the ids it
        touched (a list or one id) or anything else when it touched none (a batch number)."""
        cid = self._id(context_id)
        if expected_version is not None and (
            isinstance(expected_version, bool) or not isinstance(expected_version, int)
        ):
            raise InvalidOperationError(
                f"expected_version must be an integer, got {expected_version!r}"
            )
        refused = False  # another writer holds the turn: take one rather than race again
        for attempt in range(MAX_ATTEMPTS):
            if attempt and not refused:
                # Lost a race: wait a random, growing moment, so that writers racing on one
                # context stop colliding in lockstep (none starves).
                time.sleep(random.uniform(0, min(0.05, 0.0005 * 2**attempt)))
            wanted = self._turns.wanted(cid, attempt, refused)
            if wanted:
                # Load the context before queueing: turns pass quickly when the holder only
                # catches up with the newest events.
                with self._lock(cid):
                    self._cached_or_loaded(cid)
            with self._lock(cid), self._turns.turn(cid, wanted) as turn:
                if turn is not None:
                    # Holding the context's turn: read what others stored; the write follows.
                    ctx, fresh = self._fresh(cid), True
                    if ctx.version > self._chain_heads.get(cid, (0, ""))[0]:
                        self._turns.saw_others(cid)  # others still write here: keep queueing
                else:
                    ctx, fresh = self._cached_or_loaded(cid)
                if expected_version is not None and ctx.version != expected_version and not fresh:
                    ctx, fresh = self._fresh(cid), True
                if expected_version is not None and ctx.version != expected_version:
                    raise VersionConflictError(
                        f"context {cid} is at version {ctx.version}, not {expected_version}"
                    )
                before = ctx.version
                try:
                    touched = command(ctx)
                except CtxStoreError:
                    if fresh:
                        raise
                    # The refusal may come from a stale cache: judge again on fresh state.
                    self._forget(cid)
                    continue
                except BaseException:
                    self._forget(cid)
                    raise
                try:
                    # The event store directly: Application.save's protocol checks cost
                    # more per append than the domain's own work.
                    self._put(cid, before, ctx.collect_events(), turn)
                except IntegrityError as exc:
                    self._forget(cid)
                    refused = TURN_HELD in str(exc)
                    if refused:
                        self._turns.saw_others(cid)
                    if expected_version is not None and not refused:
                        raise VersionConflictError(
                            f"context {cid} moved past version {expected_version} while writing"
                        ) from exc
                    continue
                except BaseException:
                    self._forget(cid)
                    raise
                self._maybe_snapshot(ctx, before)
                ids = (
                    touched
                    if isinstance(touched, list)
                    else [touched]
                    if isinstance(touched, str)
                    else []
                )
                return Written(
                    context_id=cid,
                    version=ctx.version,
                    batch=ctx.batch,
                    ids=ids,
                    tokens=ctx.tokens + REPLY_PRIMING,
                    messages=len(ctx.order),
                )
        raise VersionConflictError(f"context {cid}: gave up after {MAX_ATTEMPTS} racing writes")

    def _maybe_snapshot(self, ctx: Context, before: int) -> None:
        """Snapshot when the version crosses a multiple of the step (adapters/storage/snapshot_policy.py),
        then delete the older snapshot the new one makes redundant, if any."""
        held = held_messages(ctx)
        every = snapshot_step(self.settings.snapshot_interval, held)
        if self.snapshots is None or ctx.version // every <= before // every:
            return
        try:
            self.snapshots.put([Context.Snapshot.take(ctx)])
            prune_superseded(self.snapshots.recorder, ctx.id, ctx.version, held)
        except PersistenceError:
            # The command's event is stored; a missing snapshot only costs read time.
            log.warning(
                "snapshot of context %s at version %d (or deleting the one it supersedes) failed",
                ctx.id,
                ctx.version,
                exc_info=True,
            )

    def _forget(self, cid: UUID) -> None:
        """Drop a context from the cache (its state may be ahead of or behind storage)."""
        with suppress(KeyError):
            self._cache.get(cid, evict=True)
        self._chain_heads.pop(cid, None)

    def _put(self, cid: UUID, before: int, events: Sequence[Any], turn: Turn | None = None) -> None:
        """Store a context's new events (versions before+1, ...), each chained to the last;
        a writer holding the context's turn writes where it holds it.

        Raises the library's IntegrityError when another writer stored version before+1, or
        (naming TURN_HELD) when another writer holds the context's turn.
        """
        if not events:
            return
        mapper = cast(ChainingMapper, self.mapper)
        stored, head = mapper.to_sealed_events(events, self._chain_head(cid, before))
        if turn is not None and turn.connection is not None:
            cast(OrderedPostgresRecorder, self.recorder).insert_events_on(turn.connection, stored)
        elif turn is not None:
            self.recorder.insert_events(stored)
        else:
            with self._turns.racing(cid):
                self.recorder.insert_events(stored)
        if len(self._chain_heads) >= 4 * self.settings.cache_size:
            self._chain_heads.clear()
        self._chain_heads[cid] = (before + len(stored), head)

    def _chain_head(self, cid: UUID, version: int) -> str:
        """The chain of the context's event at `version` (what the next event links to)."""
        if version == 0:
            return GENESIS
        known = self._chain_heads.get(cid)
        if known is not None and known[0] == version:
            return known[1]
        found = self.recorder.select_events(cid, gt=version - 1, lte=version, limit=1)
        if not found:
            raise ContextNotFoundError(f"context {cid} has no event at version {version}")
        plain = cast(ChainingMapper, self.mapper).plaintext(found[0].state)
        chain = unseal(plain)[1]
        return anchor(plain) if chain is None else chain

    def _cached_or_loaded(self, cid: UUID) -> tuple[Context, bool]:
        try:
            return self._cache.get(cid), False
        except KeyError:
            ctx = self._get(cid)
            self._cache.put(cid, ctx)
            return ctx, True

    def _fresh(self, cid: UUID) -> Context:
        """The cached aggregate caught up with events other writers stored, or a fresh load."""
        ctx, fresh = self._cached_or_loaded(cid)
        if not fresh:
            for e in self.events.get(cid, gt=ctx.version):
                cast(Context.Event, e).mutate(ctx)
        return ctx

    def _get(self, cid: UUID, version: int | None = None) -> Context:
        try:
            ctx: Context = self.repository.get(cid, version=version)
        except AggregateNotFoundError as exc:
            raise ContextNotFoundError(f"no context with id {cid}") from exc
        if not isinstance(ctx, Context):
            raise ContextNotFoundError(f"no context with id {cid}")
        return ctx

    def _events(self, cid: UUID) -> Iterator[Context.Event]:
        first = True
        for e in self.events.get(cid):
            first = False
            yield e  # type: ignore[misc]
        if first:
            raise ContextNotFoundError(f"no context with id {cid}")

    def _version_at_time(self, cid: UUID, at_time: datetime) -> int:
        if at_time.tzinfo is None:
            raise InvalidOperationError("at_time needs a timezone (e.g. 2026-01-01T00:00:00+00:00)")
        version = 0
        for e in self._events(cid):
            if e.timestamp > at_time:
                break
            version = e.originator_version
        if version == 0:
            raise InvalidOperationError(f"context {cid} did not exist at {at_time.isoformat()}")
        return version

    def _lock(self, cid: UUID) -> threading.Lock:
        """This process's lock on a context (held around every command on it)."""
        lock = self._locks.get(cid)
        if lock is None:
            with self._locks_guard:
                lock = self._locks.setdefault(cid, threading.Lock())
        return lock

    def _counter(self, ctx: Context) -> TextCounter:
        return self.tokenizers.counter(ctx.encoding)

    def _actor(self, actor: str | None) -> str:
        who = self.settings.actor if actor is None else actor
        if not isinstance(who, str) or not who.strip() or len(who) > 200 or json_problem(who):
            raise InvalidOperationError(
                f"actor must be a non-empty string of at most 200 chars, got {who!r}"
            )
        return who

    @staticmethod
    def _id(context_id: UUID | str) -> UUID:
        if isinstance(context_id, UUID):
            return context_id
        try:
            return UUID(str(context_id))
        except ValueError:
            raise ContextNotFoundError(f"no context with id {context_id!r} (not a UUID)") from None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._turns.close()
        super().close()
