"""Erasers: delete one context's rows in one transaction and keep the erasure records
(`ctxstore_erasures`), one class per backend; the store's erasure (adapters/store/erasure.py)
says what erasure guarantees."""

from __future__ import annotations

from abc import ABC, abstractmethod
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from eventsourcing.postgres import PostgresDatastore
from eventsourcing.sqlite import SQLiteDatastore
from psycopg.sql import SQL, Identifier
from pydantic import BaseModel, ConfigDict

from ctxstore.adapters.storage.idempotency import idempotency_keys
from ctxstore.domain.errors import InvalidOperationError

TABLE = "ctxstore_erasures"
COLUMNS = "context_id, tenant, erased_at, actor, reason, events, snapshots"


class Erasure(BaseModel):
    """The record an erasure leaves: what was erased, by whom and why; never what it held."""

    model_config = ConfigDict(frozen=True)

    context_id: UUID
    tenant: str | None
    erased_at: datetime
    actor: str
    reason: str
    events: int  # rows deleted
    snapshots: int


class Eraser(ABC):
    """Deletes one context's rows in one transaction, and keeps the erasure records."""

    @abstractmethod
    def erase(self, record: Erasure) -> tuple[int, int]:
        """Delete the context's rows and store the record; (events, snapshots) deleted."""

    @abstractmethod
    def records(self) -> list[Erasure]:
        """Every erasure, oldest first."""


def _record(row: Any) -> Erasure:
    return Erasure(
        context_id=UUID(row[0]), tenant=row[1],
        erased_at=datetime.fromtimestamp(row[2], UTC), actor=row[3], reason=row[4],
        events=row[5], snapshots=row[6],
    )  # fmt: skip


class SQLiteEraser(Eraser):
    def __init__(self, datastore: SQLiteDatastore, events: str, snapshots: str) -> None:
        self.datastore, self.events, self.snapshots = datastore, events, snapshots
        with datastore.transaction(commit=True) as c:
            c.execute(
                f"CREATE TABLE IF NOT EXISTS {TABLE} (context_id TEXT NOT NULL, tenant TEXT, "
                "erased_at REAL NOT NULL, actor TEXT NOT NULL, reason TEXT NOT NULL, "
                "events INTEGER NOT NULL, snapshots INTEGER NOT NULL)"
            )

    def erase(self, record: Erasure) -> tuple[int, int]:
        hex_id = record.context_id.hex
        with self.datastore.transaction(commit=True) as c:
            c.execute("PRAGMA secure_delete = ON")  # freed pages are zeroed, not left as they were
            c.execute(f"DELETE FROM {self.events} WHERE originator_id = ?", (hex_id,))
            events = c.sqlite_cursor.rowcount
            c.execute(f"DELETE FROM {self.snapshots} WHERE originator_id = ?", (hex_id,))
            snapshots = c.sqlite_cursor.rowcount
            c.execute("DELETE FROM ctxstore_audit WHERE context_id = ?", (hex_id,))
            c.execute(
                "DELETE FROM ctxstore_idempotency WHERE context = ?", (str(record.context_id),)
            )
            c.execute(
                f"INSERT INTO {TABLE} ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (hex_id, record.tenant, record.erased_at.timestamp(), record.actor,
                 record.reason, events, snapshots),
            )  # fmt: skip
        with self.datastore.transaction(commit=False) as c:
            c.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the old pages leave the log too
        return events, snapshots

    def records(self) -> list[Erasure]:
        with self.datastore.transaction(commit=False) as c:
            c.execute(f"SELECT {COLUMNS} FROM {TABLE} ORDER BY erased_at")
            return [_record(r) for r in c.fetchall()]


class PostgresEraser(Eraser):
    def __init__(
        self, datastore: PostgresDatastore, events: str, snapshots: str, *, create: bool = True
    ) -> None:
        self.datastore = datastore
        schema = Identifier(datastore.schema)
        self.events = SQL("{0}.{1}").format(schema, Identifier(events))
        self.snapshots = SQL("{0}.{1}").format(schema, Identifier(snapshots))
        self.audit = SQL("{0}.ctxstore_audit").format(schema)
        self.keys = SQL("{0}.ctxstore_idempotency").format(schema)
        self.table = SQL("{0}.{1}").format(schema, Identifier(TABLE))
        if not create:  # a role that does not own the schema: its owner created the table
            return
        with datastore.transaction(commit=True) as c:
            c.execute(
                SQL(
                    "CREATE TABLE IF NOT EXISTS {0} (context_id text NOT NULL, tenant text, "
                    "erased_at double precision NOT NULL, actor text NOT NULL, "
                    "reason text NOT NULL, events bigint NOT NULL, snapshots bigint NOT NULL)"
                ).format(self.table)
            )

    def erase(self, record: Erasure) -> tuple[int, int]:
        cid = record.context_id
        with self.datastore.transaction(commit=True) as c:
            c.execute(SQL("DELETE FROM {0} WHERE originator_id = %s").format(self.events), (cid,))
            events = c.rowcount
            c.execute(
                SQL("DELETE FROM {0} WHERE originator_id = %s").format(self.snapshots), (cid,)
            )
            snapshots = c.rowcount
            c.execute(SQL("DELETE FROM {0} WHERE context_id = %s").format(self.audit), (cid.hex,))
            c.execute(SQL("DELETE FROM {0} WHERE context = %s").format(self.keys), (str(cid),))
            c.execute(
                SQL("INSERT INTO {0} (" + COLUMNS + ") VALUES (%s, %s, %s, %s, %s, %s, %s)")
                .format(self.table),
                (cid.hex, record.tenant, record.erased_at.timestamp(), record.actor,
                 record.reason, events, snapshots),
            )  # fmt: skip
        with self.datastore.get_connection() as conn:  # autocommit: VACUUM runs outside one
            for table in (self.events, self.snapshots, self.audit):
                conn.execute(SQL("VACUUM {0}").format(table))
        return events, snapshots

    def records(self) -> list[Erasure]:
        with self.datastore.transaction(commit=False) as c:
            c.execute(SQL("SELECT " + COLUMNS + " FROM {0} ORDER BY erased_at").format(self.table))
            return [_record(list(r.values())) for r in c.fetchall()]


def eraser(recorder: Any, snapshots: Any, *, create: bool) -> Eraser:
    """The eraser of a store's database (its tables created unless not `create`)."""
    datastore = getattr(recorder, "datastore", None)
    if not isinstance(datastore, PostgresDatastore | SQLiteDatastore):
        raise InvalidOperationError("erasure needs a SQLite or PostgreSQL store, not memory://")
    # Its table exists even if no service ran here.
    idempotency_keys(recorder, 1, 1, create=create)
    events = recorder.events_table_name
    snapshots = snapshots.events_table_name
    if isinstance(datastore, PostgresDatastore):
        return PostgresEraser(datastore, events, snapshots, create=create)
    return SQLiteEraser(datastore, events, snapshots)
