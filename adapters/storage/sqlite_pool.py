"""SQLite connections that keep their compiled statements.

The library opens each connection with `cached_statements=True`, which sqlite3 reads as a
cache of one statement: an append's BEGIN, INSERT, check and COMMIT evict one another, so
every statement is compiled again each time it runs. The append's INSERT, with the
subqueries that keep event ids rising, took ~30 µs more than a plain one for that alone,
and every read compiled its SELECT anew. These connections keep `STATEMENTS` of them.
"""

from __future__ import annotations

import sqlite3

from eventsourcing.persistence import InterfaceError
from eventsourcing.sqlite import (
    SQLITE3_DEFAULT_LOCK_TIMEOUT,
    SQLiteConnection,
    SQLiteConnectionPool,
    SQLiteFactory,
)
from eventsourcing.utils import EnvType

from ctxstore.adapters.storage.urls import SYNCHRONOUS

STATEMENTS = 256  # a store runs a few dozen distinct statements


class StatementCachingPool(SQLiteConnectionPool):
    """The library's pool, its connections made with a statement cache that holds, each
    committing as `synchronous` says (the setting sqlite_synchronous)."""

    synchronous = "FULL"

    def _create_connection(self) -> SQLiteConnection:
        try:
            c = sqlite3.connect(
                database=self.db_name, uri=True, check_same_thread=False,
                isolation_level=None, cached_statements=STATEMENTS,
                timeout=self.lock_timeout or SQLITE3_DEFAULT_LOCK_TIMEOUT,
            )  # fmt: skip
        except (sqlite3.Error, TypeError) as e:
            raise InterfaceError(e) from e
        # As the library: the file switched to WAL by the first connection.
        if not self.is_sqlite_memory_mode and not self.is_journal_mode_wal:
            if str(c.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                c.execute("PRAGMA journal_mode=WAL")
                self.journal_mode_was_changed_to_wal = True
            self.is_journal_mode_wal = True
        c.execute(f"PRAGMA synchronous = {self.synchronous}")
        c.row_factory = sqlite3.Row
        return SQLiteConnection(sqlite_conn=c, max_age=self.max_age)


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


__all__ = ["STATEMENTS", "SQLiteStoreFactory", "StatementCachingPool"]
