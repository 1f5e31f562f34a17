"""PostgreSQL: everything a store on a shared PostgreSQL server needs beside the library's
recorders (its schema, tuning and provisioning are in postgres_schema.py).

- Events: the write path in postgres_recorder.py (no table lock: the audit index follows
  the commit order, postgres_audit.py), a context's turn in postgres_turns.py.
- The audit index, erasure records and the HTTP service's idempotency keys, in the schema.
- Snapshots read and deleted by version.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg
from eventsourcing.persistence import PersistenceError
from eventsourcing.postgres import (
    PostgresAggregateRecorder,
    PostgresDatastore,
)
from psycopg.sql import SQL, Identifier

from ctxstore.adapters.keys.vault import KeyVault, PostgresVault
from ctxstore.adapters.storage import postgres_schema
from ctxstore.adapters.storage import postgres_search as search_rows
from ctxstore.adapters.storage.async_events import AsyncEvents, PostgresAsyncEvents
from ctxstore.adapters.storage.audit_index import (
    AuditView,
)
from ctxstore.adapters.storage.backend import SQLBackend
from ctxstore.adapters.storage.erasers import COLUMNS as ERASURE_COLUMNS
from ctxstore.adapters.storage.erasers import (
    TABLE,
    Eraser,
    Erasure,
    erasure_record,
    forks_json,
)
from ctxstore.adapters.storage.idempotency import SQLIdempotencyKeys
from ctxstore.adapters.storage.migrations import Migration
from ctxstore.adapters.storage.notifications import Notifications, PostgresNotifications
from ctxstore.adapters.storage.postgres_audit import DELETION_LOCK, PostgresAuditView
from ctxstore.adapters.storage.postgres_blobs import PostgresBlobRows
from ctxstore.adapters.storage.postgres_bounds import bound_datastore, bound_retries
from ctxstore.adapters.storage.postgres_recorder import binary_snapshot_inserts
from ctxstore.adapters.storage.postgres_search import PostgresSearchIndex
from ctxstore.adapters.storage.postgres_turns import PostgresTurns
from ctxstore.adapters.storage.retention_rows import RetentionRows
from ctxstore.adapters.storage.tokens import TABLE as TOKENS_TABLE
from ctxstore.adapters.storage.tokens import StoredTokens
from ctxstore.adapters.storage.turns import context_lock_key
from ctxstore.domain.errors import first_line

CHUNK = 500  # versions per query
RESEAL_RESIDUE = (
    "PostgreSQL: the replaced states stay in the write-ahead log, replicas and backups made "
    "before, and in the tables' free space until it is reused (VACUUM FULL rewrites the tables)"
)
ASYNC_POOL = 10  # the async store's connections, at most
POSTGRES_RESIDUE = (
    "PostgreSQL: the write-ahead log, streaming replicas and base backups keep the deleted "
    "rows until they are recycled, and VACUUM marks the rows' space free without zeroing it: "
    "the table files hold the bytes until the space is reused (encrypt at rest to rely on "
    "erasure); a transaction that began before the erasure still reads the rows until it ends"
)


HELD_WAIT = 2.0  # seconds an erasure waits for older transactions holding its rows to end
# Transactions in the store's database begun before the erasure that still hold a
# snapshot: their xmin keeps VACUUM from removing the rows the erasure deleted.
HOLDING = (
    "SELECT pid, state, extract(epoch FROM now() - xact_start) AS age FROM pg_stat_activity "
    "WHERE datname = current_database() AND backend_xmin IS NOT NULL "
    "AND pid <> pg_backend_pid() AND xact_start < %s ORDER BY xact_start"
)
NOT_VACUUMED = (
    "PostgreSQL: the tables were not vacuumed after the deletion (the erasure was stored, "
    "then the connection failed): the deleted rows stay in the table files as dead rows "
    "until autovacuum runs"
)


class PostgresEraser(Eraser):
    driver_errors = (PersistenceError, psycopg.Error)

    def __init__(self, datastore: PostgresDatastore, events: str, snapshots: str) -> None:
        self.datastore = datastore
        schema = Identifier(datastore.schema)
        self.events = SQL("{0}.{1}").format(schema, Identifier(events))
        self.snapshots = SQL("{0}.{1}").format(schema, Identifier(snapshots))
        self.audit = SQL("{0}.ctxstore_audit").format(schema)
        self.search = SQL("{0}.ctxstore_search").format(schema)
        self.keys = SQL("{0}.ctxstore_idempotency").format(schema)
        self.table = SQL("{0}.{1}").format(schema, Identifier(TABLE))

    def erase(self, record: Erasure) -> Erasure:
        cid = record.context_id
        # The record goes in with the deletion, naming the tables as not vacuumed yet; once
        # that commits the erasure stands, and what follows only narrows the residue.
        residue = list(record.residue) if record.shredded else [POSTGRES_RESIDUE, NOT_VACUUMED]
        with self.datastore.transaction(commit=True) as c:
            # The context's turn, exclusively: an append in flight ends first, and a later
            # one finds its previous version gone (the insert function checks it).
            c.execute("SELECT pg_advisory_xact_lock(%s)", (context_lock_key(cid),))
            # No audit indexer stores a page meanwhile: its rows of the context go too.
            c.execute("SELECT pg_advisory_xact_lock(%s)", (DELETION_LOCK,))
            c.execute(SQL("DELETE FROM {0} WHERE originator_id = %s").format(self.events), (cid,))
            events = c.rowcount
            c.execute(
                SQL("DELETE FROM {0} WHERE originator_id = %s").format(self.snapshots), (cid,)
            )
            snapshots = c.rowcount
            c.execute(SQL("DELETE FROM {0} WHERE context_id = %s").format(self.audit), (cid.hex,))
            search_rows.erase_rows(c, self.datastore.schema or "public", cid.hex)
            c.execute(SQL("DELETE FROM {0} WHERE context = %s").format(self.keys), (str(cid),))
            done = record.model_copy(
                update={"events": events, "snapshots": snapshots, "residue": residue}
            )
            c.execute(
                SQL("INSERT INTO {0} (" + ERASURE_COLUMNS + ") VALUES "
                    "(%s, %s, %s, %s, %s, %s, %s, %s, %s)").format(self.table),
                (cid.hex, done.tenant, done.erased_at.timestamp(), done.actor, done.reason,
                 events, snapshots, json.dumps(residue), forks_json(done)),
            )  # fmt: skip
        return self.narrowed(
            done, lambda: [POSTGRES_RESIDUE, *self._vacuum(), *self._held(done.erased_at)]
        )

    def _set_residue(self, done: Erasure, residue: list[str]) -> None:
        with self.datastore.transaction(commit=True) as c:
            c.execute(
                SQL("UPDATE {0} SET residue = %s WHERE context_id = %s AND erased_at = %s")
                .format(self.table),
                (json.dumps(residue), done.context_id.hex, done.erased_at.timestamp()),
            )  # fmt: skip

    def _vacuum(self) -> list[str]:
        """VACUUM every table that held the content (outside a transaction); what could not
        be vacuumed, and why."""
        left = []
        with self.datastore.get_connection() as conn:
            # A role that does not own a table is only warned that VACUUM skipped it.
            warned: list[str] = []
            conn.add_notice_handler(lambda d: warned.append(d.message_primary or ""))
            for table in (self.events, self.snapshots, self.audit, self.search, self.keys):
                warned.clear()
                try:
                    conn.execute(SQL("VACUUM {0}").format(table))
                    why = next((w for w in warned if "skipping" in w or "permission" in w), None)
                except psycopg.Error as exc:
                    why = first_line(exc)
                if why is not None:
                    left.append(
                        f"PostgreSQL: {table.as_string(conn)} was not vacuumed ({why}): its "
                        "deleted rows stay in the table files as dead rows until autovacuum "
                        "or the tables' owner vacuums it"
                    )
        return left

    def _held(self, erased_at: datetime) -> list[str]:
        """The open transactions older than the erasure, which keep its rows as dead rows
        VACUUM cannot remove: waited for within HELD_WAIT seconds (then vacuumed again),
        else named (backend, age, state)."""
        deadline, waited = time.monotonic() + HELD_WAIT, False
        with self.datastore.get_connection() as conn:
            while True:
                holding = conn.execute(HOLDING, (erased_at,)).fetchall()
                if not holding or time.monotonic() >= deadline:
                    break
                waited = True
                time.sleep(0.1)
        if not holding:
            if waited:  # they ended: the rows are removable now
                self._vacuum()
            return []
        named = "; ".join(
            f"pid {r['pid']}, {r['state'] or 'state unknown'}, open {r['age']:.0f} s"
            for r in holding[:3]
        )  # fmt: skip
        return [
            (
                f"PostgreSQL: {len(holding)} transaction(s) older than the erasure were still "
                f"open after {HELD_WAIT:g} s ({named}): they still read the deleted rows, which "
                "stay in the table files as dead rows until they end and VACUUM (or autovacuum) "
                "runs"
            )
        ]

    def records(self) -> list[Erasure]:
        with self.datastore.transaction(commit=False) as c:
            c.execute(
                SQL("SELECT " + ERASURE_COLUMNS + " FROM {0} ORDER BY erased_at").format(self.table)
            )
            return [erasure_record(list(r.values())) for r in c.fetchall()]


class PostgresIdempotencyKeys(SQLIdempotencyKeys):
    def __init__(self, datastore: PostgresDatastore, ttl: float, pending: float) -> None:
        table = SQL("{0}.ctxstore_idempotency").format(Identifier(datastore.schema))
        super().__init__(table.as_string(), "%s", ttl, pending)
        self.datastore = datastore

    def _one(self, statement: str, params: tuple[Any, ...]) -> Any:
        # One round trip each: the pool's connections commit every statement by themselves.
        with self.datastore.get_connection() as conn:
            cursor = conn.execute(self.sql[statement], params)
            if cursor.description is None:
                return None
            row = cursor.fetchone()
            return None if row is None else tuple(row.values())


def pg_table(recorder: PostgresAggregateRecorder) -> Identifier:
    """A PostgreSQL recorder's table, qualified by its schema."""
    return Identifier(recorder.datastore.schema, recorder.events_table_name)


def _runner(
    datastore: PostgresDatastore,
) -> Callable[[str, tuple[Any, ...]], list[tuple[Any, ...]]]:
    """One statement on a pooled connection (each commits by itself); the rows it returns."""

    def run(sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        with datastore.get_connection() as conn:
            cursor = conn.execute(sql, params)
            if cursor.description is None:
                return []
            return [tuple(r.values()) for r in cursor.fetchall()]

    return run


class PostgresBackend(SQLBackend):
    """A store in a PostgreSQL schema, shared by any number of processes and machines."""

    name = "postgresql"
    migrations = postgres_schema.MIGRATIONS
    audit_view_class = PostgresAuditView
    search_index_class = PostgresSearchIndex
    eraser_class = PostgresEraser
    keys_class = PostgresIdempotencyKeys
    turns_class = PostgresTurns
    blobs_class = PostgresBlobRows

    def __init__(self, env: dict[str, str]) -> None:
        super().__init__(env)
        self._conn: psycopg.Connection[Any] | None = None
        self.schema = env.get("POSTGRES_SCHEMA", "").strip() or "public"  # as the library

    @contextmanager
    def schema_lock(self) -> Iterator[None]:
        with postgres_schema.schema_lock(self.env) as conn:
            self._conn = conn
            try:
                yield
            finally:
                self._conn = None

    def may_migrate(self) -> bool:
        assert self._conn is not None
        return not postgres_schema.provisioned_elsewhere(self._conn, self.schema)

    def schema_version(self) -> int | None:
        assert self._conn is not None
        return postgres_schema.schema_version(self._conn, self.schema)

    def record_version(self, migration: Migration) -> None:
        assert self._conn is not None
        postgres_schema.record_version(self._conn, self.schema, migration)

    def configure(self, factory: Any) -> None:
        bound_datastore(
            factory.datastore,
            connect_timeout=float(self.env.get("POSTGRES_CONNECT_TIMEOUT", "10")),
            statement_timeout=float(self.env.get("POSTGRES_STATEMENT_TIMEOUT", "30")),
            libpq=postgres_schema.libpq_params(self.env),
        )

    def prepare(self, recorder: Any, snapshots: Any) -> None:
        binary_snapshot_inserts(snapshots)
        bound_retries(recorder)
        bound_retries(snapshots)

    def audit_view(self, recorder: Any) -> AuditView:
        view = super().audit_view(recorder)
        bound_retries(view)
        return view

    def async_events(self, storage: Any) -> AsyncEvents:
        timeout = float(self.env.get("POSTGRES_STATEMENT_TIMEOUT", "30"))
        conninfo = postgres_schema.conninfo(self.env)
        return PostgresAsyncEvents(storage, conninfo, ASYNC_POOL, timeout)

    def stored_tokens(self, recorder: Any) -> StoredTokens | None:
        table = SQL("{0}.{1}").format(Identifier(self.schema), Identifier(TOKENS_TABLE))
        return StoredTokens(_runner(recorder.datastore), table.as_string(), "%s")

    def retention_rows(self, recorder: Any) -> RetentionRows | None:
        prefix = Identifier(self.schema).as_string() + "."
        return RetentionRows(_runner(recorder.datastore), prefix, "%s")

    def unsealed_rows(
        self, recorder: Any, cid: UUID, prefix: bytes, limit: int
    ) -> list[tuple[int, bytes]]:
        with recorder.datastore.transaction(commit=False) as c:
            c.execute(
                SQL(
                    "SELECT originator_version, state FROM {0} WHERE originator_id = %s "
                    "AND substring(state from 1 for %s) <> %s ORDER BY originator_version LIMIT %s"
                ).format(pg_table(recorder)),
                (cid, len(prefix), prefix, limit),
            )
            return [(int(r["originator_version"]), bytes(r["state"])) for r in c.fetchall()]

    def reseal_rows(
        self, recorder: Any, cid: UUID, rows: Sequence[tuple[int, bytes, bytes]]
    ) -> int:
        statement = SQL(
            "UPDATE {0} SET state = %s WHERE originator_id = %s AND originator_version = %s "
            "AND state = %s"
        ).format(pg_table(recorder))
        with recorder.datastore.transaction(commit=True) as c:
            done = 0
            for version, old, new in rows:
                c.execute(statement, (new, cid, version, old))
                done += c.rowcount
            return done

    def remove_history(self, storage: Any, cid: UUID, through: int) -> int:
        schema = Identifier(self.schema)
        with storage.recorder.datastore.transaction(commit=True) as c:
            c.execute("SELECT pg_advisory_xact_lock(%s)", (DELETION_LOCK,))  # (see erase)
            c.execute(
                SQL(
                    "DELETE FROM {0} WHERE originator_id = %s AND originator_version > 1 "
                    "AND originator_version <= %s"
                ).format(pg_table(storage.recorder)),
                (cid, through),
            )
            removed = int(c.rowcount)
            c.execute(
                SQL("DELETE FROM {0} WHERE originator_id = %s AND originator_version <> %s").format(
                    pg_table(storage.snapshots.recorder)
                ),  # all but the origin: later ones may name removed events
                (cid, through),
            )
            c.execute(
                SQL(
                    "DELETE FROM {0}.ctxstore_audit WHERE context_id = %s AND version > 1 "
                    "AND version <= %s"
                ).format(schema),
                (cid.hex, through),
            )
            search_rows.erase_history_rows(c, self.schema, cid.hex, through)
        return max(removed, 0)

    def scrub(self, recorder: Any) -> list[str]:
        with recorder.datastore.get_connection() as conn:
            try:
                conn.execute(SQL("VACUUM {0}").format(pg_table(recorder)))
            except psycopg.Error as exc:
                return [f"PostgreSQL: not vacuumed ({first_line(exc)})"]
        return [RESEAL_RESIDUE]

    def key_vault(self, recorder: Any) -> KeyVault:
        # A table of the store's database (migration 6): shared by every instance, but in
        # its WAL and backups too (docs/explanation/security.md says what erasure guarantees then).
        return PostgresVault(
            recorder.datastore.get_connection, self.schema, "the store's database",
            apart=False, create=False,
        )  # fmt: skip

    def notifications(self, recorder: Any) -> Notifications:
        listeners = SQL("{0}.{1}").format(
            Identifier(self.schema), Identifier(postgres_schema.LISTENERS_TABLE)
        )
        return PostgresNotifications(
            postgres_schema.conninfo(self.env), postgres_schema.channel(self.schema),
            listeners.as_string(),
        )  # fmt: skip

    def snapshot_versions(self, snapshots: Any, cid: UUID, *, below: int, limit: int) -> list[int]:
        with snapshots.datastore.transaction(commit=False) as c:
            c.execute(
                SQL(
                    "SELECT originator_version FROM {0} WHERE originator_id = %s "
                    "AND originator_version < %s ORDER BY originator_version DESC LIMIT %s"
                ).format(pg_table(snapshots)),
                (cid, below, limit),
            )
            return [int(r["originator_version"]) for r in c.fetchall()]

    def delete_snapshots(self, snapshots: Any, cid: UUID, versions: Sequence[int]) -> None:
        with snapshots.datastore.transaction(commit=True) as c:
            c.execute(
                SQL(
                    "DELETE FROM {0} WHERE originator_id = %s AND originator_version = ANY(%s)"
                ).format(pg_table(snapshots)),
                (cid, list(versions)),
            )

    def event_rows(
        self, recorder: Any, cid: UUID, versions: Sequence[int]
    ) -> Iterable[tuple[int, str, bytes]]:
        table = pg_table(recorder)
        with recorder.datastore.transaction(commit=False) as c:
            for start in range(0, len(versions), CHUNK):
                c.execute(
                    SQL(
                        "SELECT originator_version, topic, state FROM {0} "
                        "WHERE originator_id = %s AND originator_version = ANY(%s)"
                    ).format(table),
                    (cid, list(versions[start : start + CHUNK])),
                )
                for row in c.fetchall():
                    yield row["originator_version"], row["topic"], bytes(row["state"])
