"""What every part of the store shares: its settings, storage, cache and tokenizers, and
the reads of contexts they are all built on (cached, caught up, at a version)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any, cast
from uuid import UUID

from eventsourcing.utils import get_topic

from ctxstore.adapters.llm.tokenizer import Tokenizers
from ctxstore.adapters.settings import Settings
from ctxstore.adapters.storage.events import DAMAGE, EventStorage, damaged
from ctxstore.adapters.store.cache import UNKNOWN, ContextCache, Held
from ctxstore.adapters.store.history_bound import Bounds
from ctxstore.adapters.store.retention import Retention
from ctxstore.adapters.store.written import WrittenVersions
from ctxstore.domain.context import Context
from ctxstore.domain.errors import (
    ContextNotFoundError,
    CtxStoreError,
    DamagedContextError,
    InvalidOperationError,
)
from ctxstore.domain.limits import check_actor, check_count, strict_int
from ctxstore.domain.messages import Message
from ctxstore.domain.prompt import PromptItem
from ctxstore.domain.tokens import TextCounter


class StoreCore:
    """One store's shared parts; the facade, writer and read modules all take it."""

    def __init__(self, storage: EventStorage, settings: Settings, url: str) -> None:
        self.storage = storage
        self.closed = False
        self.settings = settings
        self.url = url
        self.cache = ContextCache(settings.cache_size)
        self.tokenizers = Tokenizers(settings.tiktoken_cache_dir)
        self.retention = Retention(self)  # expired contexts are served to no one
        self.bounds = Bounds(self)  # where bounded histories now start
        self.written = WrittenVersions()  # what a read from a replica must show (replicas.py)

    # ---- names ---------------------------------------------------------------------

    @staticmethod
    def id(context_id: UUID | str) -> UUID:
        """A context id from a UUID or its text; raises ContextNotFoundError."""
        if isinstance(context_id, UUID):
            return context_id
        try:
            return UUID(str(context_id))
        except ValueError:
            raise ContextNotFoundError(f"no context with id {context_id!r} (not a UUID)") from None

    def actor(self, actor: str | None) -> str:
        """The actor a command records (the configured default when it names none)."""
        return check_actor(self.settings.actor if actor is None else actor)

    def counter(self, ctx: Context) -> TextCounter:
        return self.tokenizers.counter(ctx.encoding)

    # ---- contexts ------------------------------------------------------------------

    def cached_or_loaded(self, cid: UUID, held: Held | None = None) -> tuple[Context, bool]:
        """The cached aggregate (False), or one loaded now and cached (True)."""
        held = held or self.cache.held(cid)
        if held.ctx is not None:
            return held.ctx, False
        return self.load(cid, held), True

    def load(self, cid: UUID, held: Held) -> Context:
        """The context read now and cached (read_counted)."""
        ctx, held.erasures = self.read_counted(cid)
        held.ctx = ctx
        return ctx

    def read_counted(self, cid: UUID) -> tuple[Context, int]:
        """The context read now, and how many times it had been erased (read first: an
        erasure after it is seen by the next append). Caches nothing: the async store runs
        it on a worker thread and caches what an await that was not cancelled returns."""
        erasures = self.storage.erasures_of(cid)
        return self.storage.get(cid), erasures

    def fresh(self, cid: UUID, held: Held | None = None) -> Context:
        """The cached aggregate caught up with events other writers stored, or a fresh load.
        Callers hold the context's lock."""
        held = held or self.cache.held(cid)
        ctx, loaded = self.cached_or_loaded(cid, held)
        if not loaded:
            try:
                if not self.caught_up(ctx, held, *self.storage.events_after(cid, ctx.version)):
                    ctx = self.load(cid, held)
            except CtxStoreError:
                raise
            except DAMAGE as exc:
                held.stale()
                raise damaged(cid, exc) from exc
        self.retention.check(ctx)  # on what is stored now: an expired context is not served
        return ctx

    def caught_up(self, ctx: Context, held: Held, later: list[Any], erasures: int) -> bool:
        """Fold the events stored after the cached `ctx` into it; False, folding nothing,
        when its context was erased since it was read (and maybe made again under its id:
        what follows is another context's, and what `ctx` holds is gone)."""
        if erasures != held.erasures:
            return False
        for e in later:
            cast(Context.Event, e).mutate(ctx)
        return True

    def head(self, cid: UUID) -> Context:
        """A private copy of the context now (never the cached one)."""
        ctx = self.storage.get(cid)
        self.retention.check(ctx)
        return ctx

    def context_at(self, cid: UUID, at_version: int) -> Context:
        """A private copy of the context at a version (from the nearest snapshot)."""
        if not strict_int(at_version) or at_version < 1:
            raise InvalidOperationError(
                f"at_version must be a positive integer, got {at_version!r}"
            )
        if self.retention.active():
            self.retention.check(self.storage.get(cid))
        self.bounds.check_version(cid, at_version)
        ctx = self.storage.get(cid, version=at_version)
        if ctx.version < at_version:
            raise InvalidOperationError(
                f"context {cid} has no version {at_version}; its head is version {ctx.version}"
            )
        return ctx

    def events(self, cid: UUID) -> Iterator[Context.Event]:
        """Every event of a context in order; raises ContextNotFoundError, and
        DamagedContextError where a version is missing or an event cannot be read."""
        expected = 1
        try:
            for e in self.storage.events.get(cid):
                if e.originator_version != expected and expected == 2:
                    # A bounded history: its checkpoint stands for the removed versions.
                    cp = self.bounds.of(cid)
                    if cp is not None and e.originator_version == cp.version + 1:
                        yield self.bounds.removed_event(cid, cp)
                        expected = cp.version + 1
                if e.originator_version != expected:
                    raise DamagedContextError(
                        f"context {cid}'s stored events are damaged: version {expected} is "
                        f"missing (the next stored is {e.originator_version})"
                    )
                if expected == 1 and not isinstance(e, Context.ContextCreated):
                    raise DamagedContextError(
                        f"context {cid}'s stored events are damaged: its first event is not "
                        "its creation"
                    )
                expected += 1
                yield cast(Context.Event, e)
        except CtxStoreError:
            raise
        except DAMAGE as exc:
            raise damaged(cid, exc, expected) from exc
        if expected == 1:
            raise ContextNotFoundError(f"no context with id {cid}")

    def all_of(self, *event_classes: type[Context.Event]) -> Iterator[Context.Event]:
        """Every stored event of some types, across contexts, in the order recorded."""
        topics = [get_topic(c) for c in event_classes]
        start = 1
        while True:
            page = self.storage.recorder.select_notifications(start, 500, topics=topics)
            if not page:
                return
            for n in page:
                yield self.storage.to_event(n)
            start = page[-1].id + 1

    def version_at_time(self, cid: UUID, at_time: datetime) -> int:
        if at_time.tzinfo is None:
            raise InvalidOperationError("at_time needs a timezone (e.g. 2026-01-01T00:00:00+00:00)")
        version = 0
        for e in self.events(cid):
            if e.timestamp > at_time:
                break
            version = e.originator_version
        if version == 0:
            raise InvalidOperationError(f"context {cid} did not exist at {at_time.isoformat()}")
        return version

    def exists(self, cid: UUID) -> bool:
        return bool(self.storage.recorder.select_events(cid, limit=1))

    def require(self, cid: UUID) -> None:
        """Raise ContextNotFoundError unless the context exists."""
        if not self.exists(cid):
            raise ContextNotFoundError(f"no context with id {cid}")

    def check_count(self, ctx: Context, adding: int) -> None:
        check_count(len(ctx.order), adding, self.settings.max_messages, ctx.id)

    # ---- tenants -------------------------------------------------------------------

    def tenant_of(self, context_id: UUID | str) -> str | None:
        """The tenant that owns a context (None: no tenant); raises ContextNotFoundError.

        A context's tenant never changes, so it is read once from its creation event.
        """
        cid = self.id(context_id)
        known = self.cache.tenant(cid)
        if known is not UNKNOWN:
            return cast(str | None, known)
        first = self.storage.recorder.select_events(cid, lte=1, limit=1)
        if not first:
            raise ContextNotFoundError(f"no context with id {cid}")
        created = self.storage.to_event(first[0])
        assert isinstance(created, Context.ContextCreated)
        return self.cache.remember_tenant(cid, created.tenant)

    def knows(self, cid: UUID) -> bool:
        """Whether this process has seen the context (its tenant is remembered)."""
        return self.cache.tenant(cid) is not UNKNOWN

    def forget(self, cid: UUID) -> None:
        """Drop everything this process keeps about a context (after erasure); its live
        tails look again, and end."""
        self.cache.drop(cid)
        self.storage.notifications.publish(cid.hex)

    # ---- messages as the read side uses them ----------------------------------------

    def prompt_items(self, ctx: Context, held: Held | None = None) -> list[PromptItem]:
        """The visible messages as validated models with their counts, remembered per
        context: a stored message never changes in place, so (id, version) names it."""
        known = (held or self.cache.held(ctx.id)).parsed
        if len(known) > 2 * len(ctx.order) + 64:
            known.clear()  # mostly messages no longer visible
        items = []
        for i in ctx.order:
            version = ctx.entry_version(i)
            hit = known.get(i)
            if hit is None or hit[0] != version:
                message = Message.model_validate(ctx.stored_message(i))
                item = PromptItem(message, ctx.tokens_of(i), bool(ctx.covered_by(i)))
                hit = known[i] = (version, item)
            items.append(hit[1])
        return items

    def close(self) -> None:
        self.closed = True
        self.storage.close()
