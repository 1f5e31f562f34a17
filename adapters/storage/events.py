"""The eventsourcing machinery of one store: recorders, mapper, snapshots, audit index.

`EventStorage` composes the library's `Application` (which builds the recorders, mapper and
snapshot store from its environment) and exposes what the store needs to read and append.
It has no `save()`: the store's writer (adapters/store/writer.py) is the one path that turns
a command into stored events, with their chain links and the snapshot policy.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Iterable, Iterator
from typing import Any, cast
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError, Application
from eventsourcing.domain import DomainEventProtocol, OriginatorVersionError
from eventsourcing.persistence import (
    ApplicationRecorder,
    EventStore,
    InfrastructureFactory,
    Mapper,
    OperationalError,
    Transcoder,
)
from eventsourcing.utils import Environment, TopicError, resolve_topic

from ctxstore.adapters.keys.audit_seal import AuditSealer
from ctxstore.adapters.keys.cipher import MAGIC as SEALED
from ctxstore.adapters.keys.cipher import STORE_KEY, ContextCipher, KeyDestroyedError
from ctxstore.adapters.keys.setup import OwnedCipher, context_cipher
from ctxstore.adapters.settings import Settings
from ctxstore.adapters.storage.async_events import AsyncEvents
from ctxstore.adapters.storage.audit_index import AuditView
from ctxstore.adapters.storage.backend import Backend, driver_errors
from ctxstore.adapters.storage.blobs import BlobRows
from ctxstore.adapters.storage.codec.chain import ChainingMapper
from ctxstore.adapters.storage.codec.compression import compressor
from ctxstore.adapters.storage.codec.transcoder import ContextTranscoder
from ctxstore.adapters.storage.erasers import Eraser
from ctxstore.adapters.storage.idempotency import IdempotencyKeys
from ctxstore.adapters.storage.migrations import Migration, current, pending, refuse_outdated
from ctxstore.adapters.storage.notifications import Notifications
from ctxstore.adapters.storage.retention_rows import RetentionRows
from ctxstore.adapters.storage.search_index import SearchIndex
from ctxstore.adapters.storage.snapshot_store import SnapshotStore
from ctxstore.adapters.storage.tokens import StoredTokens
from ctxstore.adapters.storage.urls import library_env, redact
from ctxstore.domain.context import Context
from ctxstore.domain.errors import (
    ConfigurationError,
    ContextNotFoundError,
    CtxStoreError,
    DamagedContextError,
    StoreUnavailableError,
    first_line,
)

log = logging.getLogger(__name__)
OPEN_ATTEMPTS = 8  # tries to open a SQLite file other processes are creating (~5 s)
# What replaying a damaged stream raises: a missing version, an unknown or wrong event
# type, a first event that is not a creation, a state its event cannot apply.
DAMAGE = (OriginatorVersionError, TopicError, AssertionError, TypeError, KeyError, AttributeError)


# By topic: a backend's module (and its driver) is imported only when a URL names it, so
# the command line starts without loading psycopg for a SQLite store.
BACKENDS: dict[str | None, str] = {
    "eventsourcing.postgres": "ctxstore.adapters.storage.postgres:PostgresBackend",
    "ctxstore.adapters.storage.sqlite_pool:SQLiteStoreFactory": (
        "ctxstore.adapters.storage.sqlite:SQLiteBackend"
    ),
    "eventsourcing.popo": "ctxstore.adapters.storage.memory:MemoryBackend",
}


def backend_for(env: dict[str, str]) -> Backend:
    """The backend of the library environment a store URL gave."""
    backend: type[Backend] = resolve_topic(BACKENDS[env.get("PERSISTENCE_MODULE")])
    return backend(env)


def damaged(cid: UUID, exc: BaseException, version: int | None = None) -> DamagedContextError:
    """The typed error for a context whose stored events cannot be replayed."""
    if isinstance(exc, OriginatorVersionError) and len(exc.args) == 2:
        found, wanted = exc.args
        where = f"version {wanted} is missing (the next stored is {found})"
    elif isinstance(exc, AssertionError) or (version == 1):
        where = "its first event (its creation) is missing"
    else:
        where = f"{'version ' + str(version) + ': ' if version else ''}{type(exc).__name__}: {exc}"
    return DamagedContextError(f"context {cid}'s stored events are damaged: {where}"[:500])


class _Library(Application[UUID]):
    """The library's application, configured by ctxstore's settings only; private to
    EventStorage, which never calls its save()."""

    name = "ctxstore"

    def __init__(self, env: dict[str, str], compress: str, backend: Backend) -> None:
        self._compress = compress
        self._backend = backend
        super().__init__(env)

    def construct_factory(self, env: Environment) -> InfrastructureFactory:
        # Before any recorder connects: the backend sets up how connections are made.
        factory = super().construct_factory(env)
        self._backend.configure(factory)
        return factory

    def construct_transcoder(self) -> Transcoder:
        return ContextTranscoder()

    def construct_mapper(self) -> Mapper[UUID]:
        # The cipher as the library's factory sets it; our compressor reads every form.
        plain: Mapper[UUID] = self.factory.mapper(transcoder=self.construct_transcoder())
        return ChainingMapper(plain.transcoder, compressor(self._compress), plain.cipher)

    def construct_snapshot_store(self) -> SnapshotStore:
        # Snapshots name the events holding their messages (storage/snapshot_store.py).
        library = super().construct_snapshot_store()
        return SnapshotStore(
            library.mapper, library.recorder, self.recorder, self._backend.event_rows
        )

    def construct_env(self, name: str, env: dict[str, str] | None = None) -> Environment:  # type: ignore[override]
        # Only our settings configure the library: it would otherwise read os.environ.
        return Environment(name, {"IS_SNAPSHOTTING_ENABLED": "y", **(env or {})})


def unopened(url: str, exc: BaseException) -> StoreUnavailableError:
    """Why the store at `url` could not be opened, in one line (a damaged file says so)."""
    cause = first_line(exc) or type(exc).__name__
    damaged = " (the file is damaged: restore it from a backup)" if "malformed" in cause else ""
    return StoreUnavailableError(f"cannot open the store at {redact(url)}: {cause}{damaged}")


class EventReader:
    """A store's events, read only: every append goes through the writer, which links it
    into the context's chain; the library's event store would append beside it."""

    def __init__(self, events: EventStore[UUID]) -> None:
        self._events = events

    def get(
        self, originator_id: UUID, *, gt: int | None = None, lte: int | None = None,
        desc: bool = False, limit: int | None = None,
    ) -> Iterator[DomainEventProtocol[UUID]]:  # fmt: skip
        """The context's events after version `gt` up to `lte`, oldest first unless `desc`."""
        return self._events.get(originator_id, gt=gt, lte=lte, desc=desc, limit=limit)


class EventStorage:
    """What one store reads and appends through, on the backend its URL chose."""

    def __init__(self, env: dict[str, str], settings: Settings, backend: Backend) -> None:
        self.env = env
        self.backend = backend
        # The library never runs DDL: the schema is the migrations' (storage/migrations.py).
        library = _Library({**env, "CREATE_TABLE": "n"}, settings.compress, backend)
        self._library = library
        self.recorder: ApplicationRecorder = library.recorder
        self.mapper = cast(ChainingMapper, library.mapper)
        self.events = EventReader(library.events)  # (appends: the writer's, chained)
        assert isinstance(library.snapshots, SnapshotStore)
        self.snapshots: SnapshotStore = library.snapshots
        backend.bind(self.recorder)
        backend.prepare(self.recorder, self.snapshots.recorder)
        self.turns = backend.turns(self.recorder)  # contended contexts' writers take turns
        self.audit_index: AuditView = backend.audit_view(self.recorder)
        # Search across contexts (None: turned off, CTXSTORE_SEARCH__ENABLED=false).
        self.search_index: SearchIndex | None = (
            backend.search_index(self.recorder) if settings.search.enabled else None
        )
        # Keys per context (adapters/keys/): states, index rows and responses sealed with
        # their context's data key; attachments (shared by hash) with the store's own.
        self.keys: ContextCipher | None = context_cipher(
            settings, lambda: backend.key_vault(self.recorder)
        )
        self.mapper.keys = self.keys
        if self.keys is not None:
            self.audit_index.sealer = AuditSealer(self.keys)
        blob_cipher = None if self.keys is None else OwnedCipher(self.keys, STORE_KEY)
        self.blobs: BlobRows = backend.blobs(self.recorder, blob_cipher)
        self.blobs.keys = self.keys  # each attachment under its own key, wrapped per context
        self.notifications: Notifications = backend.notifications(self.recorder)
        self.tokens: StoredTokens | None = backend.stored_tokens(self.recorder)
        self.retention: RetentionRows | None = backend.retention_rows(self.recorder)
        self.applied: list[Migration] = []  # what opening this storage migrated

    @classmethod
    def open(
        cls, url: str, settings: Settings, *, migrate: bool = True, create: bool = True,
        read_only: bool = False,
    ) -> EventStorage:  # fmt: skip
        """The storage at `url`, its schema brought to this release's version when its role
        may (unless not `migrate`: then an outdated schema is refused); raises
        StoreUnavailableError when it cannot be opened, its schema is newer than this
        release, or its newest event cannot be read with these settings (another key)."""
        env = library_env(
            url, settings.connect_timeout, settings.statement_timeout, create=create,
            sqlite_synchronous=settings.sqlite_synchronous,
        )  # fmt: skip
        faults: tuple[type[BaseException], ...] = (*driver_errors(), OSError)
        try:
            for attempt in range(OPEN_ATTEMPTS):
                backend = backend_for(env)
                try:
                    with backend.schema_lock():
                        storage = cls(env, settings, backend)
                        try:
                            storage.applied = storage.upgrade(migrate=migrate and not read_only)
                            if not read_only:  # a replica's index is the primary's to repair
                                storage.repair_audit_index()
                        except BaseException:
                            storage.close()
                            raise
                    break
                except (sqlite3.OperationalError, OperationalError) as exc:
                    # Processes opening a new SQLite file together: its first connection
                    # turns on WAL, which another's may refuse at once ("locked"); and a
                    # migration's transaction, begun as a reader, is refused at once the
                    # write lock while another process migrates (SQLite will not wait into
                    # a deadlock). Migrations are idempotent: open again.
                    retry = backend.name == "sqlite" and "locked" in str(exc)
                    if not retry or attempt == OPEN_ATTEMPTS - 1:
                        raise
                    time.sleep(0.02 * 2**attempt)
        except sqlite3.DatabaseError as exc:
            if "not a database" in str(exc):
                raise ConfigurationError(
                    f"{redact(url)} names a file that is not a SQLite database"
                ) from None
            raise unopened(url, exc) from exc
        except faults as exc:
            raise unopened(url, exc) from exc
        try:
            storage.check_readable(url)
        except faults as exc:  # a damaged file, a page that does not read
            storage.close()
            raise unopened(url, exc) from exc
        return storage

    def repair_audit_index(self) -> None:
        """A read model damaged behind the store's back (its table dropped or truncated, its
        position moved) is made anew and rebuilt from the events when next read."""
        try:
            damaged = self.audit_index.needs_rebuild()
        except driver_errors() as exc:  # its table is gone: make it again
            if not any(said in str(exc) for said in ("no such table", "does not exist")):
                raise  # not a missing table (a damaged file): said where the store opens
            log.warning("the audit index's table is missing; creating it again")
            self.audit_index.create_table()
            damaged = True
        if not damaged and self.keys is not None and self.audit_index.has_plain_rows():
            log.warning("the audit index holds rows from before encryption; rebuilding it sealed")
            damaged = True
        if damaged:
            log.warning("the audit index disagrees with its tracked position; rebuilding it")
            self.audit_index.reset()
            if self.search_index is not None:  # it follows the audit index's positions
                self.search_index.rewind()

    def upgrade(self, *, migrate: bool) -> list[Migration]:
        """Apply the migrations this schema lacks, in order; returns those applied."""
        allowed = self.backend.may_migrate()  # PostgreSQL: names tables a role lacks
        todo = pending(self.backend.migrations, self.backend.schema_version())
        if todo and (not migrate or not allowed):
            refuse_outdated(self.backend.schema_version(), self.backend.migrations)
        for migration in todo:
            log.info("schema migration %d: %s", migration.version, migration.description)
            migration.apply(self.backend, self.recorder, self.snapshots.recorder)
            self.backend.record_version(migration)
        return todo

    @property
    def schema_version(self) -> int:
        return current(self.backend.migrations)

    def check_readable(self, url: str) -> None:
        """Read the newest stored event: a store written with another encryption key (or
        none) fails here, clearly, not on some later read; compression never does."""
        last = self.recorder.max_notification_id()
        found = self.recorder.select_notifications(last or 1, 1) if last else []
        try:
            for n in found:
                self.mapper.to_domain_event(n)
            if self.keys is not None:
                self.keys.index_hash("")  # the KEK opens the store's own key
        except KeyDestroyedError:
            pass  # an erased context's event, in a copy made before the erasure: unreadable
        except ValueError as exc:  # undecryptable, undecompressible, unparsable
            self.close()
            sealed = any(bytes(n.state[: len(SEALED)]) == SEALED for n in found)
            if sealed and self.keys is None:
                why = (
                    "they are encrypted and no key is set: set CTXSTORE_ENCRYPTION_KEY (or "
                    "CTXSTORE_KEY_FILE, CTXSTORE_KMS) to the key they were written with"
                )
            elif sealed:
                why = (
                    "they are encrypted with a key this one does not open: check "
                    "CTXSTORE_ENCRYPTION_KEY (or CTXSTORE_KEY_FILE, CTXSTORE_KMS) and "
                    "CTXSTORE_KEY_VAULT"
                )
            else:
                why = f"they do not decode ({type(exc).__name__}: {first_line(exc)[:160]})"
            raise StoreUnavailableError(
                f"cannot read the events stored at {redact(url)}: {why}"
            ) from None

    def erasures_of(self, cid: UUID) -> int:
        """How many times the context was erased (backend.erasures_of)."""
        return self.backend.erasures_of(self.recorder, cid)

    def events_after(self, cid: UUID, version: int) -> tuple[list[Any], int]:
        """The context's events after `version` (domain events) and how many times it was
        erased, read together: what a cached state's catch-up needs."""
        stored, erasures = self.backend.events_after(self.recorder, cid, version)
        return [self.to_event(s) for s in stored], erasures

    def get(self, cid: UUID, version: int | None = None) -> Context:
        """A context from its nearest snapshot and the events after it; raises
        ContextNotFoundError."""
        try:
            ctx: Any = self._library.repository.get(cid, version=version, projector_func=_project)
        except AggregateNotFoundError as exc:
            raise ContextNotFoundError(f"no context with id {cid}") from exc
        except CtxStoreError:
            raise
        except KeyDestroyedError as exc:  # a copy made before its erasure
            raise DamagedContextError(f"context {cid} cannot be read: {exc}") from None
        except DAMAGE as exc:
            raise damaged(cid, exc) from exc
        if not isinstance(ctx, Context):
            raise ContextNotFoundError(f"no context with id {cid}")
        return ctx

    def eraser(self) -> Eraser:
        """The eraser of this store's database (memory:// erases its structures alike)."""
        return self.backend.eraser(self.recorder, self.snapshots.recorder)

    def idempotency_keys(self, ttl: float, pending: float) -> IdempotencyKeys:
        """The HTTP service's idempotency keys, in this store's database."""
        return self.backend.idempotency_keys(self.recorder, ttl, pending, self.keys)

    def async_events(self) -> AsyncEvents:
        """This storage's events for an async store (its own connections, where it has)."""
        return self.backend.async_events(self)

    def to_event(self, stored: Any) -> Context.Event:
        return cast(Context.Event, self.mapper.to_domain_event(stored))

    def close(self) -> None:
        if self.keys is not None:
            self.keys.keys.vault.close()
        self.notifications.close()
        self.turns.close()
        self._library.close()
        self.backend.close()


def _project(aggregate: Any, events: Iterable[Any]) -> Any:
    """The library's projector without its per-event check against a runtime Protocol
    (an isinstance of a Protocol costs about 35 us; every event here is a Context event)."""
    for event in events:
        aggregate = event.mutate(aggregate)
    return aggregate
