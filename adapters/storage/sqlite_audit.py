"""SQLite's audit index: rows per event in the store's file, queried by filter and position;
and the column helper the backend's migrations share with it."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from eventsourcing.persistence import (
    OperationalError,
    Tracking,
)
from eventsourcing.sqlite import (
    SQLITE3_DEFAULT_LOCK_TIMEOUT,
    SQLiteDatastore,
    SQLiteTrackingRecorder,
)

from ctxstore.adapters.storage.audit_index import (
    COLUMNS,
    INDEXES,
    TENANT_INDEX,
    TRACKING_NAME,
    AuditFilter,
    AuditView,
    PositionedRow,
    audit_params,
    audit_row,
    sql_filter,
)
from ctxstore.adapters.storage.codec.chain import Row
from ctxstore.adapters.storage.sqlite_recorder import EVENT_IDS
from ctxstore.projections.audit import AuditRow, Revert


class SQLiteAuditView(SQLiteTrackingRecorder, AuditView):
    """The audit index in the store's SQLite file."""

    def __init__(self, datastore: SQLiteDatastore, events_table: str) -> None:
        super().__init__(datastore)
        self.events_table = events_table

    def event_rows(self, after: int, limit: int) -> list[PositionedRow]:
        with self.datastore.transaction(commit=False) as c:
            c.sqlite_cursor.row_factory = None  # plain tuples: no per-row objects to build
            c.execute(
                f"SELECT rowid, originator_id, originator_version, topic, state "
                f"FROM {self.events_table} WHERE rowid > ? ORDER BY rowid LIMIT ?",
                (after, limit),
            )
            return c.fetchall()  # type: ignore[no-any-return]

    def context_rows(self, context_hex: str, after_version: int, limit: int) -> list[Row]:
        with self.datastore.transaction(commit=False) as c:
            c.execute(
                f"SELECT originator_id, originator_version, topic, state FROM {self.events_table} "
                "WHERE originator_id = ? AND originator_version > ? "
                "ORDER BY originator_version LIMIT ?",
                (context_hex, after_version, limit),
            )
            return [(r[0], r[1], r[2], r[3]) for r in c.fetchall()]

    def construct_create_table_statements(self) -> list[str]:
        statements = super().construct_create_table_statements()
        statements.append(
            "CREATE TABLE IF NOT EXISTS ctxstore_audit ("
            "position INTEGER PRIMARY KEY, context_id TEXT NOT NULL, version INTEGER NOT NULL, "
            "type TEXT NOT NULL, actor TEXT NOT NULL, ts INTEGER NOT NULL, "
            "batch INTEGER NOT NULL, facts TEXT NOT NULL, reverted_by INTEGER, tenant TEXT, "
            "UNIQUE (context_id, version))"
        )
        statements += [
            f"CREATE INDEX IF NOT EXISTS {n} ON ctxstore_audit {c}" for n, c in INDEXES.items()
        ]
        return statements

    def create_table(self) -> None:
        super().create_table()
        add_column(self.datastore, "ctxstore_audit", "tenant")  # tables from before tenants
        with self.datastore.transaction(commit=True) as c:
            c.execute(
                f"CREATE INDEX IF NOT EXISTS {TENANT_INDEX[0]} ON ctxstore_audit {TENANT_INDEX[1]}"
            )

    def _newest(self, tracked: int) -> tuple[int | None, int | None, int | None]:
        with self.datastore.transaction(commit=False) as c:
            c.execute("SELECT MAX(position) FROM ctxstore_audit")
            newest_row = c.fetchone()[0]
            c.execute(f"SELECT MAX(rowid) FROM {self.events_table} WHERE rowid <= ?", (tracked,))
            newest_event = c.fetchone()[0]
            # The newest id given out: the newest event's, or an erased one's after it.
            c.execute(
                f"SELECT max(COALESCE((SELECT MAX(rowid) FROM {self.events_table}), 0), "
                f"COALESCE((SELECT newest FROM {EVENT_IDS}), 0))"
            )
            return newest_row, newest_event, c.fetchone()[0]

    def reset(self) -> None:
        with self.datastore.transaction(commit=True) as c:
            c.execute("PRAGMA secure_delete = ON")  # rows indexed before encryption: zeroed
            c.execute("DELETE FROM ctxstore_audit")
            c.execute("DELETE FROM tracking WHERE application_name = ?", (TRACKING_NAME,))
        truncate_wal(self.datastore)  # nor in the log's older frames

    def project(
        self, rows: Sequence[AuditRow], reverts: Sequence[Revert], upto: int, mark: Any,
        ids: Sequence[int],
    ) -> None:  # fmt: skip
        with self.datastore.transaction(commit=True) as c:
            # Each row only while its event is stored: one writer at a time, so an erasure
            # committed since the page was read is seen here, and one after it waits.
            c.executemany(
                "INSERT INTO ctxstore_audit (position, context_id, version, type, actor, ts, "
                "batch, facts, tenant) SELECT ?, ?, ?, ?, ?, ?, ?, ?, ? WHERE EXISTS "
                f"(SELECT 1 FROM {self.events_table} WHERE rowid = ?)",
                [(*audit_params(r), n) for r, n in zip(self.sealed(rows), ids, strict=True)],
            )
            for rv in reverts:
                c.execute(
                    "UPDATE ctxstore_audit SET reverted_by = ? WHERE context_id = ? "
                    "AND version >= ? AND version < ? AND reverted_by IS NULL",
                    (rv.by, rv.context_id.hex, rv.from_version, rv.by),
                )
            self._insert_tracking(c, Tracking(TRACKING_NAME, upto))

    def last_writes(self) -> list[tuple[str, int, str | None, int]]:
        with self.datastore.transaction(commit=False) as c:
            c.execute(
                "SELECT context_id, MAX(ts), MAX(tenant), MAX(version) FROM ctxstore_audit "
                "GROUP BY context_id"
            )
            return [(r[0], int(r[1]), r[2], int(r[3])) for r in c.fetchall()]

    def has_plain_rows(self) -> bool:
        with self.datastore.transaction(commit=False) as c:
            c.execute("SELECT 1 FROM ctxstore_audit WHERE facts NOT LIKE 'sealed:%' LIMIT 1")
            return c.fetchone() is not None

    def indexed_heads(self, context_hex: str | None = None) -> dict[str, int]:
        where, params = ("WHERE context_id = ? ", [context_hex]) if context_hex else ("", [])
        with self.datastore.transaction(commit=False) as c:
            c.execute(
                f"SELECT context_id, MAX(version) FROM ctxstore_audit {where}GROUP BY context_id",
                params,
            )
            return {r[0]: r[1] for r in c.fetchall()}

    def query(
        self, where: AuditFilter, after: int, limit: int
    ) -> list[tuple[AuditRow, int | None]]:
        clause, params = sql_filter(self.hidden(where), "?")
        # SQLite's planner would walk all of an actor's (or a context's) rows in position
        # order; with a time bound the (actor, ts) range is the short way, and with a window
        # of versions the (context_id, version) range (PostgreSQL chooses them by itself).
        hint = ""
        if where.context_id is not None and (
            where.from_version is not None or where.to_version is not None
        ):
            hint = " INDEXED BY ctxstore_audit_context_version_idx"
        elif where.actor is not None and where.since is not None:
            hint = " INDEXED BY ctxstore_audit_actor_ts_idx"
        with self.datastore.transaction(commit=False) as c:
            c.execute(
                f"SELECT {COLUMNS} FROM ctxstore_audit{hint} WHERE position > ?{clause} "
                "ORDER BY position LIMIT ?",
                [after, *params, limit],
            )
            return self.opened([audit_row(r) for r in c.fetchall()])


def add_column(datastore: SQLiteDatastore, table: str, column: str) -> None:
    """Add a TEXT column to a table that lacks it. Read first, then write in a transaction of
    its own: a read that turns into a write inside one transaction fails at once ("database
    is locked") when another process is writing, instead of waiting."""
    with datastore.transaction(commit=False) as c:
        c.execute(f"PRAGMA table_info({table})")
        missing = column not in {r[1] for r in c.fetchall()}
    if missing:
        try:
            with datastore.transaction(commit=True) as c:
                c.execute(f"ALTER TABLE {table} ADD COLUMN {column} TEXT")
        except OperationalError as exc:
            if "duplicate column" not in str(exc):  # another process added it first
                raise


CHECKPOINT_ATTEMPTS = 10  # tries to empty the write-ahead log


def truncate_wal(datastore: SQLiteDatastore) -> bool:
    """Move the log's pages into the file and truncate the log, so deleted rows' pages leave
    it; a reader holding an old snapshot of the file prevents that: try a few times. Whether
    it was done."""
    for attempt in range(CHECKPOINT_ATTEMPTS):
        with datastore.transaction(commit=False) as c:
            c.execute("PRAGMA busy_timeout = 200")
            try:
                c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                busy = c.fetchone()[0]
            finally:
                waits = datastore.pool.lock_timeout or SQLITE3_DEFAULT_LOCK_TIMEOUT
                c.execute(f"PRAGMA busy_timeout = {int(waits * 1000)}")
        if not busy:
            return True
        time.sleep(0.05 * (attempt + 1))
    return False
