"""SQLite connections that keep their compiled statements.

The library opens each connection with `cached_statements=True`, which sqlite3 reads as a
cache of one statement: an append's BEGIN, INSERT, check and COMMIT evict one another, so
every statement is compiled again each time it runs. The append's INSERT, with the
subqueries that keep event ids rising, took ~30 µs more than a plain one for that alone,
and every read compiled its SELECT anew. These connections keep `STATEMENTS` of them.

A store whose file or folder cannot be written (read-only media, a copy kept without write
rights) is opened read-only (`mode=ro`; `immutable=1` where the folder cannot hold the log's
index a WAL reader needs and no log is there to read), and SQLite's refusal of a write says
why the store is read-only.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any, Self
from urllib.parse import quote

from eventsourcing.persistence import InterfaceError
from eventsourcing.sqlite import (
    SQLITE3_DEFAULT_LOCK_TIMEOUT,
    SQLiteConnection,
    SQLiteConnectionPool,
    SQLiteFactory,
)
from eventsourcing.utils import EnvType

from ctxstore.adapters.storage.urls import READ_ONLY, SYNCHRONOUS

STATEMENTS = 256  # a store runs a few dozen distinct statements
READONLY = sqlite3.SQLITE_READONLY  # SQLite's refusals of a write, its extended codes too


def read_only_uri(path: str) -> str:
    """The URI that opens the SQLite file at `path` for reading only. A reader of a WAL
    file needs the log's index (-shm) beside it, which a folder that cannot be written
    cannot take: there, with no log (-wal) to read either, the file is read as it stands."""
    file = Path(path)
    log = file.with_name(file.name + "-wal")
    index = file.with_name(file.name + "-shm")
    as_it_stands = not log.exists() and not index.exists() and not os.access(file.parent, os.W_OK)
    return f"file:{quote(str(file))}?" + ("immutable=1" if as_it_stands else "mode=ro")


class ExplainedCursor(sqlite3.Cursor):
    """A cursor of a read-only store: SQLite's refusal of a write says why it is read-only."""

    def execute(self, sql: str, parameters: Any = (), /) -> Self:
        try:
            return super().execute(sql, parameters)
        except sqlite3.OperationalError as exc:
            raise _explained(exc, self.connection) from exc

    def executemany(self, sql: str, seq_of_parameters: Any, /) -> Self:
        try:
            return super().executemany(sql, seq_of_parameters)
        except sqlite3.OperationalError as exc:
            raise _explained(exc, self.connection) from exc


class ReadOnlyConnection(sqlite3.Connection):
    """A connection to a store that can only be read; `why` says what is not writable."""

    why = ""

    def cursor(self, factory: Any = ExplainedCursor) -> Any:
        return super().cursor(factory)


def _explained(exc: sqlite3.OperationalError, conn: Any) -> sqlite3.OperationalError:
    if getattr(exc, "sqlite_errorcode", 0) & 0xFF != READONLY:
        return exc
    said = sqlite3.OperationalError(f"{exc}: the store is read-only, as {conn.why}")
    said.sqlite_errorcode = exc.sqlite_errorcode
    said.sqlite_errorname = exc.sqlite_errorname
    return said


class StatementCachingPool(SQLiteConnectionPool):
    """The library's pool, its connections made with a statement cache that holds, each
    committing as `synchronous` says (the setting sqlite_synchronous)."""

    synchronous = "FULL"
    read_only = ""  # why the store can only be read ("": it can be written)

    def _create_connection(self) -> SQLiteConnection:
        try:
            c = sqlite3.connect(
                database=read_only_uri(self.db_name) if self.read_only else self.db_name,
                uri=True, check_same_thread=False, isolation_level=None,
                cached_statements=STATEMENTS,
                timeout=self.lock_timeout or SQLITE3_DEFAULT_LOCK_TIMEOUT,
                factory=ReadOnlyConnection if self.read_only else sqlite3.Connection,
            )  # fmt: skip
        except (sqlite3.Error, TypeError) as e:
            raise InterfaceError(e) from e
        if isinstance(c, ReadOnlyConnection):
            c.why = self.read_only
        # As the library: the file switched to WAL by the first connection (a read-only
        # file stays as it was written).
        if not self.is_sqlite_memory_mode and not self.is_journal_mode_wal and not self.read_only:
            if str(c.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                c.execute("PRAGMA journal_mode=WAL")
                self.journal_mode_was_changed_to_wal = True
            self.is_journal_mode_wal = True
        c.execute(f"PRAGMA synchronous = {self.synchronous}")
        c.row_factory = sqlite3.Row
        return SQLiteConnection(sqlite_conn=c, max_age=self.max_age)


def is_read_only(pool: SQLiteConnectionPool) -> bool:
    """Whether the pool's store opened read-only (its file or folder is not writable)."""
    return isinstance(pool, StatementCachingPool) and bool(pool.read_only)


class SQLiteStoreFactory(SQLiteFactory):
    """The library's SQLite factory, its datastore's pool a StatementCachingPool."""

    def __init__(self, env: EnvType | None) -> None:
        super().__init__(env)
        made = self.datastore.pool  # (no connection made yet: it makes them on demand)
        self.datastore.pool = StatementCachingPool(
            db_name=made.db_name, lock_timeout=made.lock_timeout, pool_size=made.pool_size,
            max_overflow=made.max_overflow, pool_timeout=made.pool_timeout,
            max_age=made.max_age, pre_ping=made.pre_ping,
        )  # fmt: skip
        wanted = str((env or {}).get(SYNCHRONOUS, "FULL")).upper()
        if wanted not in ("FULL", "NORMAL"):  # (the setting's own check names it first)
            raise ValueError(f"sqlite_synchronous must be full or normal, not {wanted!r}")
        self.datastore.pool.synchronous = wanted
        self.datastore.pool.read_only = str((env or {}).get(READ_ONLY, ""))


__all__ = [
    "STATEMENTS",
    "SQLiteStoreFactory",
    "StatementCachingPool",
    "is_read_only",
    "read_only_uri",
]
