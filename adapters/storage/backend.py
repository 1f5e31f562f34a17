"""What a storage backend provides; each backend module (sqlite, postgres, memory) holds
one implementation, chosen once by the store's URL (storage/events.py, `backend_for`)."""

from __future__ import annotations

import sqlite3
import sys
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from uuid import UUID

from eventsourcing.persistence import PersistenceError

from ctxstore.adapters.keys.vault import KeyVault, MemoryVault
from ctxstore.adapters.storage.async_events import AsyncEvents
from ctxstore.adapters.storage.audit_index import AuditView
from ctxstore.adapters.storage.blobs import BlobRows
from ctxstore.adapters.storage.erasers import Eraser
from ctxstore.adapters.storage.idempotency import IdempotencyKeys
from ctxstore.adapters.storage.migrations import Migration
from ctxstore.adapters.storage.notifications import Notifications
from ctxstore.adapters.storage.retention_rows import RetentionRows
from ctxstore.adapters.storage.search_index import MemorySearchIndex, SearchIndex
from ctxstore.adapters.storage.tokens import StoredTokens
from ctxstore.adapters.storage.turns import Turns


class Backend(ABC):
    """One kind of database: its objects beside the library's recorders, and its schema."""

    name: str
    migrations: Sequence[Migration] = ()  # ordered by version, from 1

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env

    # ---- schema -----------------------------------------------------------------------

    @contextmanager
    def schema_lock(self) -> Iterator[None]:
        """Held while the schema is read and upgraded (processes starting together)."""
        yield

    def may_migrate(self) -> bool:
        """Whether this connection's role may run DDL (PostgreSQL: it owns the tables)."""
        return True

    @abstractmethod
    def schema_version(self) -> int | None:
        """The version recorded in the migrations table; None when there is none (a new
        database, or one written before versions were recorded)."""

    @abstractmethod
    def record_version(self, migration: Migration) -> None:
        """Note a migration as applied."""

    def bind(self, recorder: Any) -> None:  # noqa: B027 - optional hook
        """Note the events recorder (its connections read and record the schema version)."""

    def configure(self, factory: Any) -> None:  # noqa: B027 - optional hook
        """Set up the library's factory before any recorder connects (PostgreSQL: how its
        connections are made and bounded)."""

    def prepare(self, recorder: Any, snapshots: Any) -> None:  # noqa: B027 - optional hook
        """Per-process setup of the library's recorders (no DDL)."""

    # ---- what the store uses -----------------------------------------------------------

    @abstractmethod
    def audit_view(self, recorder: Any) -> AuditView: ...

    @abstractmethod
    def eraser(self, recorder: Any, snapshots: Any) -> Eraser: ...

    def search_index(self, recorder: Any) -> SearchIndex:
        """The search index (the memory store's: rows in a list, matched by scanning)."""
        return MemorySearchIndex()

    @abstractmethod
    def idempotency_keys(
        self, recorder: Any, ttl: float, pending: float, cipher: Any
    ) -> IdempotencyKeys: ...

    @abstractmethod
    def turns(self, recorder: Any) -> Turns: ...

    @abstractmethod
    def blobs(self, recorder: Any, cipher: Any) -> BlobRows:
        """The store's attachments (stored through `cipher` when it has one)."""

    def erasures_of(self, recorder: Any, cid: UUID) -> int:
        """How many times the context was erased (0 where a backend counts none). A writer's
        cached state of a context stands only while this stays as it was when the state was
        read: an erasure, then the context made again under its id, leaves the versions a
        stale writer checks in place (recorders refuse such an append: storage/turns.GONE)."""
        return 0

    def events_after(self, recorder: Any, cid: UUID, gt: int) -> tuple[Sequence[Any], int]:
        """The context's stored events after version `gt` and erasures_of, read together."""
        return recorder.select_events(cid, gt=gt), self.erasures_of(recorder, cid)

    @abstractmethod
    def snapshot_versions(self, snapshots: Any, cid: UUID, *, below: int, limit: int) -> list[int]:
        """The context's snapshot versions below `below`, newest first."""

    @abstractmethod
    def delete_snapshots(self, snapshots: Any, cid: UUID, versions: Sequence[int]) -> None: ...

    @abstractmethod
    def event_rows(
        self, recorder: Any, cid: UUID, versions: Sequence[int]
    ) -> Iterable[tuple[int, str, bytes]]:
        """(version, topic, stored state) of a context's events at `versions` (ascending)."""

    def unsealed_rows(
        self, recorder: Any, cid: UUID, prefix: bytes, limit: int
    ) -> list[tuple[int, bytes]]:
        """(version, state) of a context's rows (events or snapshots, by `recorder`) whose
        state does not start with `prefix` (the current key's header), in version order."""
        raise NotImplementedError(f"{self.name} stores cannot be re-encrypted in place")

    def reseal_rows(
        self, recorder: Any, cid: UUID, rows: Sequence[tuple[int, bytes, bytes]]
    ) -> int:
        """Replace each (version, old, new) state in one transaction, each only if it still
        holds `old`; the rows replaced."""
        raise NotImplementedError(f"{self.name} stores cannot be re-encrypted in place")

    def remove_history(self, storage: Any, cid: UUID, through: int) -> int:
        """Delete a context's events 2..`through`, its snapshots but the one at `through`
        and the audit rows of those versions, in one transaction; the events deleted."""
        raise NotImplementedError(f"{self.name} stores keep no retention")

    def scrub(self, recorder: Any) -> list[str]:
        """After states were replaced: clear what the old ones left in the database's own
        files, as far as the backend can; what may remain."""
        return []

    def retention_rows(self, recorder: Any) -> RetentionRows | None:
        """Retention policies and sweep records (None: the backend keeps none)."""
        return None

    def stored_tokens(self, recorder: Any) -> StoredTokens | None:
        """Bearer tokens kept hashed in the database (None: the backend keeps none)."""
        return None

    def key_vault(self, recorder: Any) -> KeyVault:
        """Where data keys are kept unless CTXSTORE_KEY_VAULT says (adapters/keys/vault.py)."""
        return MemoryVault()

    def async_events(self, storage: Any) -> AsyncEvents:
        """The store's events for the async store (storage/async_events.py): in process,
        unless a backend awaits its database."""
        return AsyncEvents(storage)

    def notifications(self, recorder: Any) -> Notifications:
        """Wake-ups when events are stored: this process's only, unless a backend can see
        other processes' (storage/notifications.py)."""
        return Notifications()

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release what the backend holds beside the recorders."""


class SQLBackend(Backend, ABC):
    """A backend whose audit index, erasure records, idempotency keys and turn locks live
    in the database beside the library's tables; subclasses name their classes."""

    audit_view_class: Any
    search_index_class: Any
    eraser_class: Any
    keys_class: Any
    turns_class: Any
    blobs_class: Any

    def audit_view(self, recorder: Any) -> AuditView:
        view: AuditView = self.audit_view_class(recorder.datastore, recorder.events_table_name)
        return view

    def search_index(self, recorder: Any) -> SearchIndex:
        index: SearchIndex = self.search_index_class(recorder.datastore, recorder.events_table_name)
        return index

    def eraser(self, recorder: Any, snapshots: Any) -> Eraser:
        found: Eraser = self.eraser_class(
            recorder.datastore, recorder.events_table_name, snapshots.events_table_name
        )
        return found

    def idempotency_keys(
        self, recorder: Any, ttl: float, pending: float, cipher: Any
    ) -> IdempotencyKeys:
        keys = self.keys_class(recorder.datastore, ttl, pending)
        keys.cipher = cipher  # stored responses hold message contents (a ContextCipher)
        found: IdempotencyKeys = keys
        return found

    def turns(self, recorder: Any) -> Turns:
        found: Turns = self.turns_class(recorder.datastore)
        return found

    def blobs(self, recorder: Any, cipher: Any) -> BlobRows:
        rows: BlobRows = self.blobs_class(recorder.datastore)
        rows.cipher = cipher  # attachments are encrypted at rest with the events
        return rows

    def erasures_of(self, recorder: Any, cid: UUID) -> int:
        return int(recorder.erasures_of(cid))

    def events_after(self, recorder: Any, cid: UUID, gt: int) -> tuple[Sequence[Any], int]:
        found: tuple[Sequence[Any], int] = recorder.select_after(cid, gt)
        return found


def driver_errors() -> tuple[type[BaseException], ...]:
    """The exceptions a database driver in use may raise (psycopg's only once loaded: a
    process that never opened PostgreSQL never imports it)."""
    found: tuple[type[BaseException], ...] = (PersistenceError, sqlite3.Error)
    psycopg = sys.modules.get("psycopg")
    return found if psycopg is None else (*found, psycopg.Error)


def tried_again(exc: BaseException, earlier: BaseException) -> None:
    """Note on a call's failure `exc` that an earlier try of the call failed with `earlier`
    (a recorder's retry): that try may have committed even when the last reached nothing."""
    setattr(exc, _EARLIER, (*earlier_tries(earlier), earlier))


def earlier_tries(exc: BaseException) -> tuple[BaseException, ...]:
    """The failures of a failed call's earlier tries, first first (none: tried once)."""
    found: tuple[BaseException, ...] = getattr(exc, _EARLIER, ())
    return found


_EARLIER = "ctxstore_earlier_tries"


def never_sent(exc: BaseException | None) -> bool:
    """Whether a failure happened before any statement reached the server (no pooled
    connection could be had in time): then nothing it carried can have been stored."""
    pool = sys.modules.get("psycopg_pool")
    while pool is not None and exc is not None:
        if isinstance(exc, pool.PoolTimeout):
            return True
        exc = exc.__cause__
    return False
