"""ShardedStore: one store over several PostgreSQL servers, each context on one of them.

Every operation that names a context runs on the server holding it (placement.py); a
context is created on the server rendezvous hashing picks, and recorded there. Operations
across contexts combine every server's answer: the audit is merged with one cursor
(merged_audit.py), listings are concatenated, attachments are stored on every server (a
context on any server may refer to one). A fork may land on another server than its
source: the source's visible context is read where it lives and the fork written where
it is placed, with the attachments it shows. `move` (move.py) changes a context's server
while the others go on.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, Self
from uuid import UUID, uuid4

from ctxstore.adapters.llm.tokenizer import Tokenizers
from ctxstore.adapters.settings import Settings, load_settings
from ctxstore.adapters.store import usage
from ctxstore.adapters.store.contract import ContextOperations
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.adapters.store.faults import type_faults
from ctxstore.adapters.store.hooks import StoreHooks
from ctxstore.adapters.store.parts import parts_of
from ctxstore.adapters.store.results import ContextSummary, Erasure, SearchPage
from ctxstore.adapters.store.search import MAX_LIMIT
from ctxstore.adapters.store.shards import arrivals
from ctxstore.adapters.store.shards import move as moving
from ctxstore.adapters.store.shards.admin import ShardedAdmin
from ctxstore.adapters.store.shards.hooks import ShardedHooks
from ctxstore.adapters.store.shards.merged_audit import MergedAuditPage, merged_page
from ctxstore.adapters.store.shards.merged_search import merged_search
from ctxstore.adapters.store.shards.placement import Directory, rendezvous, server_name
from ctxstore.adapters.store.shards.routed_commands import RoutedCommands
from ctxstore.adapters.store.shards.routed_reads import RoutedReads
from ctxstore.domain.blobs import references
from ctxstore.domain.context import JSON, Context
from ctxstore.domain.errors import (
    ConfigurationError,
    ContextMovedError,
    ContextNotFoundError,
    InvalidOperationError,
)
from ctxstore.domain.limits import check_int, check_page, chosen_id, key_context_id
from ctxstore.projections.audit import AuditEntry, AuditPage
from ctxstore.projections.usage import ModelUsage, usage_by_model


def _exported_id(lines: Sequence[str]) -> UUID | None:
    """The context id an export's first line names, if it can be read (the store the
    lines go to checks them in full)."""
    try:
        head = json.loads(lines[0]) if lines else None
        return UUID(str(head["context_id"])) if isinstance(head, dict) else None
    except (ValueError, KeyError, TypeError):
        return None


def _connector(store: ContextStore) -> Callable[[], Any]:
    return arrivals.postgres_of(store)[1].get_connection


@type_faults
class ShardedStore(RoutedCommands, RoutedReads, ContextOperations):
    """Contexts spread over the stores of several PostgreSQL servers (see the module)."""

    def __init__(self, stores: Sequence[ContextStore], settings: Settings) -> None:
        if not stores:
            raise ConfigurationError("a sharded store needs at least one server")
        for s in stores:
            if parts_of(s).storage.backend.name != "postgresql":
                raise ConfigurationError(f"shards are PostgreSQL servers, not {s.url!r}")
        self.settings = settings
        self.stores: dict[str, ContextStore] = {}
        for s in stores:
            name = server_name(_connector(s), arrivals.postgres_of(s)[0])
            if name in self.stores:
                raise ConfigurationError(f"{s.url!r} is the same server as another shard")
            self.stores[name] = s
        self.names = list(self.stores)
        first = stores[0]
        self.directory = Directory(_connector(first), arrivals.postgres_of(first)[0])
        # What the service and the integrations take beside the contract, routed alike.
        self.hooks: StoreHooks = ShardedHooks(self)

    # ---- what the HTTP service and the command line need of a store ---------------------

    @property
    def admin(self) -> ShardedAdmin:
        return ShardedAdmin(self)

    @property
    def url(self) -> str:
        """The servers' URLs, comma-separated."""
        return ",".join(s.url for s in self.stores.values())

    @property
    def tokenizers(self) -> Tokenizers:
        return self.stores[self.names[0]].tokenizers

    context_uuid = staticmethod(ContextStore.context_uuid)

    @classmethod
    def from_urls(cls, urls: Sequence[str], settings: Settings | None = None) -> ShardedStore:
        settings = settings or load_settings()
        opened: list[ContextStore] = []
        try:
            for url in urls:
                opened.append(ContextStore.from_url(url, settings))
            return cls(opened, settings)
        except BaseException:
            for s in opened:
                s.close()
            raise

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return all(s.closed for s in self.stores.values())

    def close(self) -> None:
        from ctxstore.adapters.capture.recorder import close_recorder

        close_recorder(self)  # calls captured for this store are recorded first (bounded)
        for s in self.stores.values():
            s.close()

    # ---- where a context lives -------------------------------------------------------

    def shard_of(self, context_id: UUID | str) -> str:
        """The name of the server holding a context; raises ContextNotFoundError."""
        cid = ContextStore.context_uuid(context_id)
        found = self.directory.shard_of(cid)
        if found is not None and found in self.stores:
            return found
        for name, store in self.stores.items():  # not placed (written before sharding)
            if parts_of(store).core.exists(cid):
                self.directory.place(cid, name)
                return name
        raise ContextNotFoundError(f"no context with id {cid}")

    def store_of(self, context_id: UUID | str) -> ContextStore:
        return self.stores[self.shard_of(context_id)]

    def _route(self, name: str, context_id: UUID | str, *args: Any, **kwargs: Any) -> Any:
        """Run the store's operation `name` on the server holding the context."""
        return self._on_holder(context_id, lambda s: getattr(s, name), *args, **kwargs)

    def _on_holder(
        self, context_id: UUID | str, pick: Callable[[ContextStore], Callable[..., Any]],
        *args: Any, **kwargs: Any,
    ) -> Any:  # fmt: skip
        """`pick(store)(context, ...)` on the store of the server holding the context."""
        cid = ContextStore.context_uuid(context_id)
        try:
            return pick(self.store_of(cid))(cid, *args, **kwargs)
        except (ContextNotFoundError, ContextMovedError):
            # A placement cached before a move: read it again and go there once.
            self.directory.forget(cid)
            fresh = self.directory.shard_of(cid, fresh=True)
            if fresh is None or fresh not in self.stores:
                raise
            return pick(self.stores[fresh])(cid, *args, **kwargs)

    # ---- across servers --------------------------------------------------------------

    def create(self, *, context_id: UUID | str | None = None, **kwargs: Any) -> UUID:
        """A new context on the server its id hashes to (recorded in the placement)."""
        cid = uuid4() if context_id is None else chosen_id(context_id)
        shard = rendezvous(cid, self.names)
        made = self.stores[shard].create(context_id=cid, **kwargs)
        self.directory.place(made, shard)
        return made

    def audit(self, *, after: str | int = "", limit: int = 100, **filters: Any) -> MergedAuditPage:
        """Events across every server, merged by time; pass `cursor` back as `after`."""
        only = filters.get("context_id")
        homes = None
        if only is not None:  # where it is, and where its events were shown before it came
            home = self.shard_of(only)
            homes = {home} | arrivals.servers_of(self.stores[home], ContextStore.context_uuid(only))
        moved: dict[str, dict[UUID, arrivals.Arrival]] = {}

        def read(name: str, after: int, lim: int) -> AuditPage:
            if homes is not None and name not in homes:
                return AuditPage(entries=[], cursor=after, more=False)
            page = self.stores[name].audit(after=after, limit=lim, **filters)
            found = moved[name] = arrivals.arrivals(
                self.stores[name], (e.context_id for e in page.entries)
            )
            for i, e in enumerate(page.entries):
                arrival = found.get(e.context_id)
                if arrival is not None and not arrival.complete:  # a move under way
                    return AuditPage(entries=page.entries[:i], cursor=after, more=True)
            return page

        def copied(name: str, entry: AuditEntry) -> bool:
            arrival = moved[name].get(entry.context_id)
            return arrival is not None and arrival.shown_elsewhere(entry.version)

        return merged_page(read, self.names, after, limit, copied)

    def context_for_key(
        self, key: str, *, tenant: str | None = None, name: str | None = None,
        metadata: JSON | None = None, actor: str | None = None,
    ) -> UUID:  # fmt: skip
        """The context a caller's own key names, created on first use on the server its id
        hashes to (where it already is, if placed or moved)."""
        cid = key_context_id(key, tenant)
        try:
            shard = self.shard_of(cid)
        except ContextNotFoundError:
            shard = rendezvous(cid, self.names)
        found = self.stores[shard].context_for_key(
            key, tenant=tenant, name=name, metadata=metadata, actor=actor
        )
        self.directory.place(found, shard)
        return found

    def usage_report(
        self, *, model: str | None = None, context_id: UUID | str | None = None,
        tenant: str | None = None,
    ) -> list[ModelUsage]:  # fmt: skip
        """Per model, across every server's contexts (or of one context, where it lives)."""
        if context_id is not None:
            home = self.store_of(context_id)
            return home.usage_report(model=model, context_id=context_id, tenant=tenant)
        events = [
            e
            for s in self.stores.values()
            for e in usage.usage_events(parts_of(s).core, None, model, tenant)
        ]
        return usage_by_model(events)

    def import_events(
        self, lines: Iterable[str], *, new_id: bool = False, without_trailer: bool = False,
        progress: Callable[[int, int], None] | None = None, tenant: str | None = None,
    ) -> UUID:  # fmt: skip
        """Store an exported context on the server its id hashes to (a new id's, with
        `new_id`), and place it there."""
        lines = list(lines)
        original = _exported_id(lines)
        shard = rendezvous(uuid4() if new_id or original is None else original, self.names)
        made = self.stores[shard].import_events(
            lines, new_id=new_id, without_trailer=without_trailer, progress=progress,
            tenant=tenant,
        )  # fmt: skip
        self.directory.place(made, shard)
        return made

    def import_transcript(
        self, messages: str | Sequence[JSON], *, name: str | None = None,
        actor: str | None = None, progress: Callable[[int, int], None] | None = None,
        tenant: str | None = None,
    ) -> UUID:  # fmt: skip
        """A new context from a transcript, on the server a fresh id hashes to."""
        shard = rendezvous(uuid4(), self.names)
        made = self.stores[shard].import_transcript(
            messages, name=name, actor=actor, progress=progress, tenant=tenant
        )
        self.directory.place(made, shard)
        return made

    def erasures(self) -> list[Erasure]:
        """Every server's erasure records, oldest first."""
        found = [e for s in self.stores.values() for e in s.erasures()]
        return sorted(found, key=lambda e: e.erased_at)

    def lookup_key(self, key: str, *, tenant: str | None = None) -> UUID | None:
        """The context a caller's own key names, on whichever server holds it; or None."""
        cid = key_context_id(key, tenant)
        try:
            home = self.store_of(cid)
        except ContextNotFoundError:
            return None
        return home.lookup_key(key, tenant=tenant)

    def contexts(
        self, *, limit: int = 1000, tenant: str | None = None, search: str | None = None,
        after: UUID | str | None = None,
    ) -> list[ContextSummary]:  # fmt: skip
        """Every server's contexts, server after server, each server's in its order;
        `after` pages on from the context listed last."""
        start = check_page(limit, after)
        names = self.names
        if start is not None:
            names = names[names.index(self.shard_of(start)) :]
        found: list[ContextSummary] = []
        for name in names:
            if len(found) >= limit:
                break
            found += self.stores[name].contexts(
                limit=limit - len(found), tenant=tenant, search=search, after=start
            )
            start = None  # the next server's from its first
        return found

    def search(
        self, query: str, *, tenant: str | None = None,
        context_ids: Sequence[UUID | str] | None = None, roles: Sequence[str] | None = None,
        since: datetime | None = None, until: datetime | None = None,
        include_hidden: bool = False, limit: int = 20, cursor: str | None = None,
    ) -> SearchPage:  # fmt: skip
        """Every server's hits merged by score (shards/merged_search.py)."""
        check_int(limit, "limit", low=1, high=MAX_LIMIT)

        def on(store: ContextStore) -> Callable[[str | None, int], SearchPage]:
            def searched(start: str | None, wanted: int) -> SearchPage:
                return store.search(
                    query, tenant=tenant, context_ids=context_ids, roles=roles, since=since,
                    until=until, include_hidden=include_hidden, cursor=start,
                    limit=min(wanted, MAX_LIMIT),
                )  # fmt: skip

            return searched

        return merged_search({n: on(s) for n, s in self.stores.items()}, limit, cursor)

    def verify(self, context_id: UUID | str | None = None) -> Any:
        if context_id is not None:
            return self.store_of(context_id).verify(context_id)
        results = [s.verify() for s in self.stores.values()]
        bad = [r for r in results if not r.ok]
        return bad[0] if bad else results[0]

    def put_blob(self, data: bytes, media_type: str, *, tenant: str | None = None) -> Any:
        """Stored on every server: a context on any of them may refer to it."""
        refs = [s.put_blob(data, media_type, tenant=tenant) for s in self.stores.values()]
        return refs[0]

    def record_file_id(
        self, sha256: str, provider: str, file_id: str, *, tenant: str | None = None
    ) -> None:
        """Noted on every server, as the attachment is stored on every server."""
        for s in self.stores.values():
            s.record_file_id(sha256, provider, file_id, tenant=tenant)

    def blob(self, sha256: str, *, tenant: str | None = None) -> Any:
        return next(iter(self.stores.values())).blob(sha256, tenant=tenant)

    def erase(self, context_id: UUID | str, **kwargs: Any) -> Any:
        cid = ContextStore.context_uuid(context_id)
        home = self.store_of(cid)
        earlier = arrivals.servers_of(home, cid)
        done = home.erase(cid, **kwargs)
        for name in earlier:  # its audit rows on servers it moved away from
            if name in self.stores and self.stores[name] is not home:
                arrivals.forget(self.stores[name], cid)
        self.directory.drop(cid)
        return done

    def fork(
        self, context_id: UUID | str, *, at_version: int | None = None, name: str | None = None,
        metadata: JSON | None = None, actor: str | None = None,
    ) -> UUID:  # fmt: skip
        """A new context, on the server its id hashes to, starting as a copy of this one's
        visible context (at a version); the attachments it shows go with it."""
        cid = ContextStore.context_uuid(context_id)
        source = self.store_of(cid)
        core = parts_of(source).core
        ctx = core.context_at(cid, at_version) if at_version is not None else core.head(cid)
        who = core.actor(actor)
        forked = Context.start(
            name=name if name is not None else (f"fork of {ctx.name}" if ctx.name else None),
            metadata=ctx.metadata if metadata is None else metadata,
            encoding=ctx.encoding, actor=who, tenant=ctx.tenant,
        )  # fmt: skip
        forked.fork_from(ctx, actor=who)
        shard = rendezvous(forked.id, self.names)
        target = self.stores[shard]
        refs = {r.sha256 for i in forked.order for r in references(forked.stored_message(i))}
        for sha in refs:  # the attachments travel with the fork
            blob = source.blob(sha, tenant=ctx.tenant)
            target.put_blob(blob.data, blob.ref.media_type, tenant=ctx.tenant)
        parts_of(target).writer.store_new(forked)
        if refs:
            parts_of(target).core.storage.blobs.keep(ctx.tenant, forked.id, [], refs)
        self.directory.place(forked.id, shard)
        return forked.id

    def move(self, context_id: UUID | str, to: str) -> str:
        """Move a context to server `to` (a name from `names`); returns where it was.
        Only its own writers wait while it moves (move.py)."""
        if to not in self.stores:
            raise InvalidOperationError(f"no server named {to!r}: one of {self.names}")
        return moving.move(self, ContextStore.context_uuid(context_id), to)
