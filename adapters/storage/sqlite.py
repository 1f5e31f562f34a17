"""SQLite: everything a store on one SQLite file needs beside the library's recorders.

- Events: the library's application recorder with a shorter way in (sqlite_recorder.py).
- The audit index, erasure records and the HTTP service's idempotency keys, in the file.
- Turns: a one-byte POSIX record lock in a `<file>-turns` file beside the database, at an
  offset given by the context id, exclusive for the holder and tried shared around a
  racer's insert (a crashed holder's lock goes with its process).
- The schema: `MIGRATIONS`, recorded in `ctxstore_migrations`.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any
from uuid import UUID

from eventsourcing.persistence import (
    IntegrityError,
    PersistenceError,
)
from eventsourcing.sqlite import (
    SQLiteDatastore,
)

from ctxstore.adapters.keys.vault import KeyVault, MemoryVault, SQLiteVault
from ctxstore.adapters.storage.async_events import AsyncEvents, SQLiteAsyncEvents
from ctxstore.adapters.storage.backend import Backend, SQLBackend
from ctxstore.adapters.storage.erasers import COLUMNS as ERASURE_COLUMNS
from ctxstore.adapters.storage.erasers import (
    TABLE,
    Eraser,
    Erasure,
    erasure_record,
    forks_json,
)
from ctxstore.adapters.storage.file_locks import (
    AVAILABLE,
    Racer,
    byte,
    close_file,
    offset,
    open_file,
)
from ctxstore.adapters.storage.idempotency import SQLIdempotencyKeys
from ctxstore.adapters.storage.migrations import TABLE as MIGRATIONS_TABLE
from ctxstore.adapters.storage.migrations import Migration
from ctxstore.adapters.storage.notifications import Notifications, PollingNotifications
from ctxstore.adapters.storage.retention_rows import RetentionRows, lifecycle_tables
from ctxstore.adapters.storage.sqlite_audit import SQLiteAuditView, add_column, truncate_wal
from ctxstore.adapters.storage.sqlite_blobs import SQLiteBlobRows
from ctxstore.adapters.storage.sqlite_pool import is_read_only
from ctxstore.adapters.storage.sqlite_recorder import ERASURES_INDEX, EVENT_IDS
from ctxstore.adapters.storage.sqlite_search import (
    SQLiteSearchIndex,
    erase_history_rows,
    erase_rows,
    purge_words,
)
from ctxstore.adapters.storage.tokens import TABLE as TOKENS_TABLE
from ctxstore.adapters.storage.tokens import StoredTokens
from ctxstore.adapters.storage.turns import Turn, Turns

CHUNK = 500  # versions per query (SQLite allows 999 parameters in its oldest builds)
WAL_RESIDUE = (
    "SQLite: the write-ahead log (the -wal file) still holds the erased pages: another "
    "connection was reading the database; they leave it at the next checkpoint that no "
    "reader holds up"
)


class SQLiteEraser(Eraser):
    driver_errors = (PersistenceError, sqlite3.Error)

    def __init__(self, datastore: SQLiteDatastore, events: str, snapshots: str) -> None:
        self.datastore, self.events, self.snapshots = datastore, events, snapshots

    def erase(self, record: Erasure) -> Erasure:
        hex_id = record.context_id.hex
        # The record goes in with the deletion, naming the residue the log may hold; once
        # that commits the erasure stands, and what follows only narrows the residue.
        residue = list(record.residue) if record.shredded else [WAL_RESIDUE]
        with self.datastore.transaction(commit=True) as c:
            c.execute("PRAGMA secure_delete = ON")  # freed pages are zeroed, not left as they were
            keep_ids_rising(c, self.events)
            c.execute(f"DELETE FROM {self.events} WHERE originator_id = ?", (hex_id,))
            events = c.sqlite_cursor.rowcount
            c.execute(f"DELETE FROM {self.snapshots} WHERE originator_id = ?", (hex_id,))
            snapshots = c.sqlite_cursor.rowcount
            c.execute("DELETE FROM ctxstore_audit WHERE context_id = ?", (hex_id,))
            if erase_rows(c, hex_id):  # its text in the search index, and then its words
                purge_words(c)
            c.execute(
                "DELETE FROM ctxstore_idempotency WHERE context = ?", (str(record.context_id),)
            )
            done = record.model_copy(
                update={"events": events, "snapshots": snapshots, "residue": residue}
            )
            c.execute(
                f"INSERT INTO {TABLE} ({ERASURE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (hex_id, done.tenant, done.erased_at.timestamp(), done.actor, done.reason,
                 events, snapshots, json.dumps(residue), forks_json(done)),
            )  # fmt: skip
        return self.narrowed(done, self._checkpoint)

    def _set_residue(self, done: Erasure, residue: list[str]) -> None:
        with self.datastore.transaction(commit=True) as c:
            c.execute(
                f"UPDATE {TABLE} SET residue = ? WHERE context_id = ? AND erased_at = ?",
                (json.dumps(residue), done.context_id.hex, done.erased_at.timestamp()),
            )

    def _checkpoint(self) -> list[str]:
        """Move the log's pages into the file and truncate the log, so the erased pages leave
        it (a reader holding an old snapshot of the file may prevent that: then say so)."""
        return [] if truncate_wal(self.datastore) else [WAL_RESIDUE]

    def records(self) -> list[Erasure]:
        with self.datastore.transaction(commit=False) as c:
            c.execute(f"SELECT {ERASURE_COLUMNS} FROM {TABLE} ORDER BY erased_at")
            return [erasure_record(r) for r in c.fetchall()]


class SQLiteIdempotencyKeys(SQLIdempotencyKeys):
    def __init__(self, datastore: SQLiteDatastore, ttl: float, pending: float) -> None:
        super().__init__("ctxstore_idempotency", "?", ttl, pending)
        self.datastore = datastore

    def _one(self, statement: str, params: tuple[Any, ...]) -> Any:
        with self.datastore.transaction(commit=True) as c:
            c.execute(self.sql[statement], params)
            row = c.fetchone()
            return None if row is None else tuple(row)


class SQLiteTurns(Turns):
    """Turns as record locks in the `<file>-turns` file beside the database."""

    def __init__(self, datastore: SQLiteDatastore) -> None:
        super().__init__()
        self._datastore = datastore
        self._file: int | None = None
        self._path = ""
        self._file_guard = threading.Lock()

    @contextmanager
    def _turn(self, cid: UUID) -> Iterator[Turn | None]:
        found = self._turns_file()
        if found is None:
            yield None
            return
        with byte(*found, offset(cid)).turn():
            yield Turn()

    def racing(self, cid: UUID) -> AbstractContextManager[None]:
        found = self._turns_file()
        if found is None:
            return nullcontext()
        return Racer(byte(*found, offset(cid)))

    def _turns_file(self) -> tuple[int, str] | None:
        """The lock file beside the database, opened once per process (see _open)."""
        if not AVAILABLE:
            return None
        if self._file is not None:  # opened: no need to queue for the guard
            return self._file, self._path
        with self._file_guard:
            if self._file is None:
                pool = self._datastore.pool
                if pool.is_sqlite_memory_mode or is_read_only(pool):
                    return None  # (a read-only store takes no write: SQLite says why)
                name = str(self._datastore.pool.db_name).removeprefix("file:").split("?", 1)[0]
                self._path = str(Path(name + "-turns").resolve())
                self._file = open_file(self._path)
            return self._file, self._path

    def close(self) -> None:
        with self._file_guard:
            if self._file is not None:
                close_file(self._path)
                self._file = None


# ---- the schema -----------------------------------------------------------------------

ERASURES_DDL = (
    f"CREATE TABLE IF NOT EXISTS {TABLE} (context_id TEXT NOT NULL, tenant TEXT, "
    "erased_at REAL NOT NULL, actor TEXT NOT NULL, reason TEXT NOT NULL, "
    "events INTEGER NOT NULL, snapshots INTEGER NOT NULL)"
)
IDEMPOTENCY_DDL = (
    "CREATE TABLE IF NOT EXISTS ctxstore_idempotency (tenant TEXT NOT NULL, "
    "key TEXT NOT NULL, fingerprint TEXT NOT NULL, status INTEGER, body BLOB, "
    "created REAL NOT NULL, context TEXT, PRIMARY KEY (tenant, key))"
)
BLOBS_DDL = (
    "CREATE TABLE IF NOT EXISTS ctxstore_blobs (tenant TEXT NOT NULL, sha256 TEXT NOT NULL, "
    "media_type TEXT NOT NULL, size INTEGER NOT NULL, width INTEGER, height INTEGER, "
    "data BLOB NOT NULL, created REAL NOT NULL, file_ids TEXT, PRIMARY KEY (tenant, sha256))"
)
BLOB_REFS_DDL = (
    "CREATE TABLE IF NOT EXISTS ctxstore_blob_refs (context_id TEXT NOT NULL, "
    "tenant TEXT NOT NULL, sha256 TEXT NOT NULL, PRIMARY KEY (context_id, sha256))"
)
BLOB_REFS_INDEX = (
    "CREATE INDEX IF NOT EXISTS ctxstore_blob_refs_by_blob ON ctxstore_blob_refs (tenant, sha256)"
)
MIGRATIONS_DDL = (
    f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} (version INTEGER PRIMARY KEY, "
    "description TEXT NOT NULL, applied_at REAL NOT NULL)"
)


def _base_tables(backend: Backend, events: Any, snapshots: Any) -> None:
    """The library's events, snapshots and tracking tables, the audit index (with the
    tenant column that tables from before tenants gain), erasures and idempotency keys."""
    events.create_table()
    snapshots.create_table()
    for attempt in range(3):
        try:
            SQLiteAuditView(events.datastore, events.events_table_name).create_table()
            break
        except IntegrityError:
            # Another process created the tracking table and its migration record between
            # this one's check and insert: a second pass finds them in place.
            if attempt == 2:
                raise
    with events.datastore.transaction(commit=True) as c:
        c.execute(ERASURES_DDL)
        c.execute(IDEMPOTENCY_DDL)


def _erasure_residue(backend: Backend, events: Any, snapshots: Any) -> None:
    """Erasure records say what residue may remain."""
    add_column(events.datastore, TABLE, "residue")


def _erasure_forks(backend: Backend, events: Any, snapshots: Any) -> None:
    """Erasure records name the forks erased with a context."""
    add_column(events.datastore, TABLE, "forks")


def _blobs(backend: Backend, events: Any, snapshots: Any) -> None:
    """Attachments stored once by their hash, and the contexts that refer to them."""
    with events.datastore.transaction(commit=True) as c:
        c.execute(BLOBS_DDL)
        c.execute(BLOB_REFS_DDL)
        c.execute(BLOB_REFS_INDEX)


def _blob_keys(backend: Backend, events: Any, snapshots: Any) -> None:
    """Attachments under keys of their own (adapters/keys/blob_keys.py): the key sealed per
    referring context, or with the store's key while an upload is referred to by none."""
    add_column(events.datastore, "ctxstore_blobs", "sealed_key")
    add_column(events.datastore, "ctxstore_blob_refs", "sealed_key")


def _tokens_and_retention(backend: Backend, events: Any, snapshots: Any) -> None:
    """Bearer tokens kept hashed; retention policies and the sweeps that applied them."""
    with events.datastore.transaction(commit=True) as c:
        for table, ddl in lifecycle_tables():
            c.execute(ddl.format(t=table))


def keep_ids_rising(c: Any, events: str) -> None:
    """Before events are deleted: remember the newest event id, which the next event's id
    must exceed (SQLite would give the deleted newest rowids out again, and audit cursors
    and the index's position, past them, would pass over the events that took them)."""
    c.execute(
        f"INSERT INTO {EVENT_IDS} (one, newest) SELECT 1, COALESCE(MAX(rowid), 0) FROM "
        f"{events} WHERE true ON CONFLICT (one) DO UPDATE SET newest = "
        "max(newest, excluded.newest)"
    )


def _event_ids(backend: Backend, events: Any, snapshots: Any) -> None:
    """Event ids are never given out twice, even after the newest events were erased."""
    with events.datastore.transaction(commit=True) as c:
        c.execute(
            f"CREATE TABLE IF NOT EXISTS {EVENT_IDS} (one INTEGER PRIMARY KEY CHECK (one = 1), "
            "newest INTEGER NOT NULL)"
        )
        keep_ids_rising(c, events.events_table_name)  # (a store erased before this release)


def _erasures_by_context(backend: Backend, events: Any, snapshots: Any) -> None:
    """A context's erasures are counted on every append (storage/backend.erasures_of)."""
    with events.datastore.transaction(commit=True) as c:
        c.execute(ERASURES_INDEX)


def _search(backend: Backend, events: Any, snapshots: Any) -> None:
    """Search across contexts: the rows, their words in FTS5, the positions reached."""
    SQLiteSearchIndex(events.datastore, events.events_table_name).create_table()


MIGRATIONS = (
    Migration(1, "events, snapshots, audit index, erasures, idempotency keys", _base_tables),
    Migration(2, "erasure records say what residue may remain", _erasure_residue),
    Migration(3, "erasure records name the forks erased with a context", _erasure_forks),
    Migration(4, "attachments stored once by their hash (blobs and references)", _blobs),
    Migration(5, "hashed tokens; retention policies, sweeps, checkpoints", _tokens_and_retention),
    Migration(6, "attachments under keys of their own, wrapped per context", _blob_keys),
    Migration(7, "event ids never given out twice after an erasure", _event_ids),
    Migration(8, "erasures found by context", _erasures_by_context),
    Migration(9, "search across contexts (FTS5)", _search),
)


def _runner(datastore: SQLiteDatastore) -> Callable[[str, tuple[Any, ...]], list[tuple[Any, ...]]]:
    """One statement in a transaction of its own; the rows it returns."""

    def run(sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        with datastore.transaction(commit=True) as c:
            c.execute(sql, params)
            return [tuple(r) for r in c.fetchall()]

    return run


class SQLiteBackend(SQLBackend):
    """A store in one SQLite file (WAL mode): one machine's processes share it."""

    name = "sqlite"
    migrations = MIGRATIONS
    audit_view_class = SQLiteAuditView
    search_index_class = SQLiteSearchIndex
    eraser_class = SQLiteEraser
    keys_class = SQLiteIdempotencyKeys
    turns_class = SQLiteTurns
    blobs_class = SQLiteBlobRows

    def __init__(self, env: dict[str, str]) -> None:
        super().__init__(env)
        self.datastore: SQLiteDatastore | None = None

    def bind(self, recorder: Any) -> None:
        self.datastore = recorder.datastore

    def schema_version(self) -> int | None:
        assert self.datastore is not None
        with self.datastore.transaction(commit=False) as c:
            c.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                (MIGRATIONS_TABLE,),
            )
            if c.fetchone() is None:
                return None
            c.execute(f"SELECT MAX(version) FROM {MIGRATIONS_TABLE}")
            found = c.fetchone()[0]
            return None if found is None else int(found)

    def record_version(self, migration: Migration) -> None:
        assert self.datastore is not None
        # Two transactions, each opened by its write: a deferred transaction that reads and
        # then writes fails at once ("database is locked") when another process wrote since.
        with self.datastore.transaction(commit=True) as c:
            c.execute(MIGRATIONS_DDL)
        with self.datastore.transaction(commit=True) as c:
            c.execute(
                f"INSERT OR IGNORE INTO {MIGRATIONS_TABLE} (version, description, applied_at) "
                "VALUES (?, ?, ?)",
                (migration.version, migration.description, time.time()),
            )

    def async_events(self, storage: Any) -> AsyncEvents:
        return SQLiteAsyncEvents(storage, int(self.env.get("SQLITE_LOCK_TIMEOUT", "30")) * 1000)

    def stored_tokens(self, recorder: Any) -> StoredTokens | None:
        return StoredTokens(_runner(recorder.datastore), TOKENS_TABLE, "?")

    def retention_rows(self, recorder: Any) -> RetentionRows | None:
        return RetentionRows(_runner(recorder.datastore), "", "?")

    def unsealed_rows(
        self, recorder: Any, cid: UUID, prefix: bytes, limit: int
    ) -> list[tuple[int, bytes]]:
        with recorder.datastore.transaction(commit=False) as c:
            c.execute(
                f"SELECT originator_version, state FROM {recorder.events_table_name} "
                "WHERE originator_id = ? AND substr(state, 1, ?) <> ? "
                "ORDER BY originator_version LIMIT ?",
                (cid.hex, len(prefix), prefix, limit),
            )
            return [(int(r[0]), bytes(r[1])) for r in c.fetchall()]

    def reseal_rows(
        self, recorder: Any, cid: UUID, rows: Sequence[tuple[int, bytes, bytes]]
    ) -> int:
        with recorder.datastore.transaction(commit=True) as c:
            c.execute("PRAGMA secure_delete = ON")  # the old states' bytes are zeroed
            done = 0
            for version, old, new in rows:
                c.execute(
                    f"UPDATE {recorder.events_table_name} SET state = ? WHERE originator_id = ? "
                    "AND originator_version = ? AND state = ?",
                    (new, cid.hex, version, old),
                )
                done += c.sqlite_cursor.rowcount
            return done

    def remove_history(self, storage: Any, cid: UUID, through: int) -> int:
        events = storage.recorder.events_table_name
        snapshots = storage.snapshots.recorder.events_table_name
        with storage.recorder.datastore.transaction(commit=True) as c:
            c.execute("PRAGMA secure_delete = ON")
            keep_ids_rising(c, events)
            c.execute(
                f"DELETE FROM {events} WHERE originator_id = ? AND originator_version > 1 "
                "AND originator_version <= ?",
                (cid.hex, through),
            )
            removed = int(c.sqlite_cursor.rowcount)
            c.execute(  # all but the origin: later ones may name removed events
                f"DELETE FROM {snapshots} WHERE originator_id = ? AND originator_version <> ?",
                (cid.hex, through),
            )
            c.execute(
                "DELETE FROM ctxstore_audit WHERE context_id = ? AND version > 1 AND version <= ?",
                (cid.hex, through),
            )
            erase_history_rows(c, cid.hex, through)
        if removed:
            truncate_wal(storage.recorder.datastore)
        return max(removed, 0)

    def scrub(self, recorder: Any) -> list[str]:
        # Page splits leave copies of moved cells in pages' free space: VACUUM writes every
        # page anew, and the log's older frames go with the checkpoint.
        conn = sqlite3.connect(self.env["SQLITE_DBNAME"], timeout=30, isolation_level=None)
        try:
            conn.execute("VACUUM")
        finally:
            conn.close()
        return [] if truncate_wal(recorder.datastore) else [WAL_RESIDUE]

    def key_vault(self, recorder: Any) -> KeyVault:
        path = self.env["SQLITE_DBNAME"]
        if path == ":memory:" or path.startswith("file:"):
            return MemoryVault()
        return SQLiteVault(Path(path + ".keys"))  # its own file: outside the store's WAL

    def notifications(self, recorder: Any) -> Notifications:
        path = self.env["SQLITE_DBNAME"]
        if path == ":memory:" or path.startswith("file:"):
            return Notifications()  # one connection's database: no other process sees it
        return PollingNotifications(path, recorder.events_table_name)

    def snapshot_versions(self, snapshots: Any, cid: UUID, *, below: int, limit: int) -> list[int]:
        with snapshots.datastore.transaction(commit=False) as c:
            c.execute(
                f"SELECT originator_version FROM {snapshots.events_table_name} "
                "WHERE originator_id = ? AND originator_version < ? "
                "ORDER BY originator_version DESC LIMIT ?",
                (cid.hex, below, limit),
            )
            return [int(r[0]) for r in c.fetchall()]

    def delete_snapshots(self, snapshots: Any, cid: UUID, versions: Sequence[int]) -> None:
        with snapshots.datastore.transaction(commit=True) as c:
            c.executemany(
                f"DELETE FROM {snapshots.events_table_name} "
                "WHERE originator_id = ? AND originator_version = ?",
                [(cid.hex, v) for v in versions],
            )

    def event_rows(
        self, recorder: Any, cid: UUID, versions: Sequence[int]
    ) -> Iterable[tuple[int, str, bytes]]:
        with recorder.datastore.transaction(commit=False) as c:
            for start in range(0, len(versions), CHUNK):
                chunk = versions[start : start + CHUNK]
                c.execute(
                    f"SELECT originator_version, topic, state FROM {recorder.events_table_name} "
                    f"WHERE originator_id = ? AND originator_version IN ({','.join('?' * len(chunk))})",
                    (cid.hex, *chunk),
                )
                for row in c.fetchall():
                    yield row["originator_version"], row["topic"], row["state"]
