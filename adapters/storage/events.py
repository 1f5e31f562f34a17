"""The eventsourcing machinery of one store: recorders, mapper, snapshots, audit index.

`EventStorage` composes the library's `Application` (which builds the recorders, mapper and
snapshot store from its environment) and exposes what the store needs to read and append.
It has no `save()`: the store's writer (adapters/store/writer.py) is the one path that turns
a command into stored events, with their chain links and the snapshot policy.
"""

from __future__ import annotations

import logging
from typing import Any, cast
from uuid import UUID

import psycopg
from eventsourcing.application import AggregateNotFoundError, Application
from eventsourcing.persistence import (
    ApplicationRecorder,
    EventStore,
    Mapper,
    PersistenceError,
    Transcoder,
)
from eventsourcing.postgres import PostgresApplicationRecorder
from eventsourcing.utils import Environment

from ctxstore.adapters.settings import Settings, library_env, redact
from ctxstore.adapters.storage.audit_index import AuditView, audit_view, binary_snapshot_inserts
from ctxstore.adapters.storage.codec.chain import ChainingMapper
from ctxstore.adapters.storage.codec.compression import compressor
from ctxstore.adapters.storage.codec.transcoder import ContextTranscoder
from ctxstore.adapters.storage.erasers import Eraser, eraser
from ctxstore.adapters.storage.postgres import provisioned_elsewhere, schema_lock, tune_tables
from ctxstore.adapters.storage.snapshot_store import SnapshotStore
from ctxstore.adapters.storage.turns import Turns
from ctxstore.domain.context import Context
from ctxstore.domain.errors import ContextNotFoundError, StoreUnavailableError

log = logging.getLogger(__name__)


class _Library(Application[UUID]):
    """The library's application, configured by ctxstore's settings only; private to
    EventStorage, which never calls its save()."""

    name = "ctxstore"

    def __init__(self, env: dict[str, str], compress: str) -> None:
        self._compress = compress
        super().__init__(env)

    def construct_transcoder(self) -> Transcoder:
        return ContextTranscoder()

    def construct_mapper(self) -> Mapper[UUID]:
        # The cipher as the library's factory sets it; our compressor reads every form.
        plain: Mapper[UUID] = self.factory.mapper(transcoder=self.construct_transcoder())
        return ChainingMapper(plain.transcoder, compressor(self._compress), plain.cipher)

    def construct_snapshot_store(self) -> SnapshotStore:
        # Snapshots name the events holding their messages (storage/snapshot_store.py).
        library = super().construct_snapshot_store()
        return SnapshotStore(library.mapper, library.recorder, self.recorder)

    def construct_env(self, name: str, env: dict[str, str] | None = None) -> Environment:  # type: ignore[override]
        # Only our settings configure the library: it would otherwise read os.environ.
        return Environment(name, {"IS_SNAPSHOTTING_ENABLED": "y", **(env or {})})


class EventStorage:
    """What one store reads and appends through: chosen once by the store's URL."""

    def __init__(self, env: dict[str, str], settings: Settings) -> None:
        self.env = env
        library = _Library(env, settings.compress)
        self._library = library
        self.recorder: ApplicationRecorder = library.recorder
        self.mapper = cast(ChainingMapper, library.mapper)
        self.events: EventStore[UUID] = library.events
        assert isinstance(library.snapshots, SnapshotStore)
        self.snapshots: SnapshotStore = library.snapshots
        self.turns = Turns(self.recorder)  # contended contexts' writers take turns
        binary_snapshot_inserts(self.snapshots.recorder)
        # False: a role that does not own the tables opened the store (provisioned_elsewhere)
        # and runs no DDL; the library's switch says so, and ours follow it.
        self.creates_tables = env.get("CREATE_TABLE", "y") != "n"
        if self.creates_tables:
            tune_tables(self.recorder, self.snapshots.recorder)
        self.audit_index: AuditView = audit_view(self.recorder, create=self.creates_tables)
        if self.creates_tables and isinstance(self.recorder, PostgresApplicationRecorder):
            self.eraser()  # its tables too, which a role that does not own the schema cannot make
        if self.audit_index.needs_rebuild():
            # Dropped, truncated, or its position moved: rebuilt from events when next read.
            log.warning("the audit index disagrees with its tracked position; rebuilding it")
            self.audit_index.reset()

    @classmethod
    def open(cls, url: str, settings: Settings) -> EventStorage:
        """The storage at `url`; raises StoreUnavailableError when it cannot be opened or
        its newest event cannot be read with these settings (another encryption key)."""
        env = {**library_env(url, settings.connect_timeout), **settings.at_rest()}
        try:
            with schema_lock(env) as conn:
                schema = env.get("POSTGRES_SCHEMA", "").strip() or "public"  # as the library
                if conn is not None and provisioned_elsewhere(conn, schema):
                    env["CREATE_TABLE"] = "n"  # the library's switch; ours follow it
                storage = cls(env, settings)
        except (PersistenceError, psycopg.Error, OSError) as exc:
            raise StoreUnavailableError(f"cannot open the store at {redact(url)}: {exc}") from exc
        storage.check_readable(url)
        return storage

    def check_readable(self, url: str) -> None:
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
                f"cannot read the events stored at {redact(url)} with these settings: "
                "check CTXSTORE_ENCRYPTION_KEY "
                f"({type(exc).__name__})"
            ) from None

    def get(self, cid: UUID, version: int | None = None) -> Context:
        """A context from its nearest snapshot and the events after it; raises
        ContextNotFoundError."""
        try:
            ctx: Any = self._library.repository.get(cid, version=version)
        except AggregateNotFoundError as exc:
            raise ContextNotFoundError(f"no context with id {cid}") from exc
        if not isinstance(ctx, Context):
            raise ContextNotFoundError(f"no context with id {cid}")
        return ctx

    def eraser(self) -> Eraser:
        """The eraser of this store's database; raises InvalidOperationError on memory://."""
        return eraser(self.recorder, self.snapshots.recorder, create=self.creates_tables)

    def to_event(self, stored: Any) -> Context.Event:
        return cast(Context.Event, self.mapper.to_domain_event(stored))

    def close(self) -> None:
        self.turns.close()
        self._library.close()
