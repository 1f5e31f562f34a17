"""The persisted audit index: a read model of every event, kept by the library's tracking.

Each backend's view is a tracking recorder of the eventsourcing library: the rows of a page
of events and the position they reach are written in one transaction, so the index never
holds an event twice or skips one. Queries filter by context, type, actor and time and
page by position (the application sequence), through the indexes named below.

On PostgreSQL the insert function of `OrderedPostgresRecorder` takes the events table's
EXCLUSIVE lock (as the library's default write path does): positions then become visible
in order, so a reader that has seen position n will never later find a smaller one.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import psycopg
from eventsourcing.persistence import (
    IntegrityError,
    OperationalError,
    PersistenceError,
    StoredEvent,
    Tracking,
    TrackingRecorder,
)
from eventsourcing.popo import POPOTrackingRecorder
from eventsourcing.postgres import (
    PostgresAggregateRecorder,
    PostgresApplicationRecorder,
    PostgresDatastore,
    PostgresTrackingRecorder,
)
from eventsourcing.sqlite import SQLiteDatastore, SQLiteTrackingRecorder
from psycopg.rows import tuple_row
from psycopg.sql import SQL, Composed, Identifier

from ctxstore.adapters.storage.codec.chain import Row
from ctxstore.adapters.storage.turns import TURN_HELD, TURN_HELD_SQLSTATE, TURN_SETTING

PositionedRow = tuple[int, str, int, str, bytes]  # position, context hex, version, topic, state
from ctxstore.projections.audit import AuditRow, Revert

TRACKING_NAME = "ctxstore_audit"  # the projection's name in the tracking table

# Each index serves one filter and keeps its rows in position order, so a page is a short
# range scan; (actor, ts) answers "one actor, recent hours" without reading older rows.
INDEXES = {
    "ctxstore_audit_context_idx": "(context_id, position)",
    "ctxstore_audit_context_version_idx": "(context_id, version)",  # a window of versions
    "ctxstore_audit_actor_idx": "(actor, position)",
    "ctxstore_audit_actor_ts_idx": "(actor, ts)",
    "ctxstore_audit_type_idx": "(type, position)",
    "ctxstore_audit_ts_idx": "(ts)",
}
# Added with tenants: created after the column, which older tables gain by ALTER TABLE.
TENANT_INDEX = ("ctxstore_audit_tenant_idx", "(tenant, position)")


@dataclass(frozen=True)
class AuditFilter:
    """What an audit query asks for; None means any."""

    context_id: UUID | None = None
    types: Sequence[str] | None = None
    actor: str | None = None
    tenant: str | None = None  # only the contexts of this tenant
    since: int | None = None  # microseconds since the epoch, inclusive
    until: int | None = None  # exclusive
    from_version: int | None = None  # with context_id: versions from, inclusive
    to_version: int | None = None  # inclusive


class AuditView(TrackingRecorder, ABC):
    """The audit index of one store."""

    @abstractmethod
    def project(self, rows: Sequence[AuditRow], reverts: Sequence[Revert], upto: int) -> None:
        """Store rows and rollback marks, and the position reached, in one transaction.

        Raises the library's IntegrityError when another process got there first.
        """

    @abstractmethod
    def query(
        self, where: AuditFilter, after: int, limit: int
    ) -> list[tuple[AuditRow, int | None]]:
        """Rows after a position, in position order, each with the version that reverted it."""

    def position(self) -> int:
        return self.max_tracking_id(TRACKING_NAME) or 0

    def needs_rebuild(self) -> bool:
        """Whether the rows disagree with the position tracked: the table was dropped or
        truncated, its newest rows deleted, or the tracking record moved (three index
        lookups).

        Rows that outlive their events are not damage: they are how `verify` names newest
        events deleted behind the store's back, so they are kept. (An erased context loses
        its events and its rows alike.)
        """
        tracked = self.position()
        found = self._newest(tracked)
        newest_row, newest_event, newest_stored = (v or 0 for v in found)
        rows_missing = newest_row < newest_event
        tracking_behind = newest_row > tracked
        tracking_ahead = tracked > newest_stored and newest_row <= newest_stored
        return rows_missing or tracking_behind or tracking_ahead

    def _newest(self, tracked: int) -> tuple[int | None, int | None, int | None]:
        """The newest row's position, and the newest stored event's, up to `tracked` and
        of all."""
        return None, None, None

    def reset(self) -> None:
        """Forget every row and the position reached: the next catch-up rebuilds from events."""

    @abstractmethod
    def event_rows(self, after: int, limit: int) -> list[PositionedRow]:
        """Stored events after a position, raw: (position, context hex, version, topic, state)."""

    @abstractmethod
    def context_rows(self, context_hex: str, after_version: int, limit: int) -> list[Row]:
        """One context's stored events after a version, raw, in version order."""

    @abstractmethod
    def indexed_heads(self, context_hex: str | None = None) -> dict[str, int]:
        """The newest version the index has seen of each context (or of one)."""


# Each scalar bound of a filter: its field and the condition it puts on a column.
_BOUNDS = (
    ("actor", "actor = {}"),
    ("tenant", "tenant = {}"),
    ("since", "ts >= {}"),
    ("until", "ts < {}"),
    ("from_version", "version >= {}"),
    ("to_version", "version <= {}"),
)


def _sql_filter(where: AuditFilter, mark: str) -> tuple[str, list[Any]]:
    """The WHERE clause (after `position > ?`) and its parameters, in one placeholder style."""
    clauses: list[str] = []
    params: list[Any] = []
    if where.context_id is not None:
        clauses.append(f"context_id = {mark}")
        params.append(where.context_id.hex)
    if where.types:
        clauses.append("type IN (" + ", ".join([mark] * len(where.types)) + ")")
        params.extend(where.types)
    for name, condition in _BOUNDS:
        value = getattr(where, name)
        if value is not None:
            clauses.append(condition.format(mark))
            params.append(value)
    return "".join(" AND " + c for c in clauses), params


COLUMNS = "position, context_id, version, type, actor, ts, batch, facts, tenant, reverted_by"


def _row(r: Sequence[Any]) -> tuple[AuditRow, int | None]:
    return AuditRow(r[0], UUID(r[1]), r[2], r[3], r[4], r[5], r[6], r[7], r[8]), r[9]


def _params(r: AuditRow) -> tuple[Any, ...]:
    return (
        r.position, r.context_id.hex, r.version, r.type, r.actor, r.timestamp, r.batch, r.facts,
        r.tenant,
    )  # fmt: skip


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
        # Tables from before tenants gain the column. Read first, then write in a transaction
        # of its own: a read that turns into a write inside one transaction fails at once
        # ("database is locked") when another process is writing, instead of waiting.
        with self.datastore.transaction(commit=False) as c:
            c.execute("PRAGMA table_info(ctxstore_audit)")
            missing = "tenant" not in {r[1] for r in c.fetchall()}
        if missing:
            try:
                with self.datastore.transaction(commit=True) as c:
                    c.execute("ALTER TABLE ctxstore_audit ADD COLUMN tenant TEXT")
            except OperationalError as exc:
                if "duplicate column" not in str(exc):  # another process added it first
                    raise
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
            c.execute(f"SELECT MAX(rowid) FROM {self.events_table}")
            return newest_row, newest_event, c.fetchone()[0]

    def reset(self) -> None:
        with self.datastore.transaction(commit=True) as c:
            c.execute("DELETE FROM ctxstore_audit")
            c.execute("DELETE FROM tracking WHERE application_name = ?", (TRACKING_NAME,))

    def project(self, rows: Sequence[AuditRow], reverts: Sequence[Revert], upto: int) -> None:
        with self.datastore.transaction(commit=True) as c:
            c.executemany(
                "INSERT INTO ctxstore_audit (position, context_id, version, type, actor, ts, "
                "batch, facts, tenant) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [_params(r) for r in rows],
            )
            for rv in reverts:
                c.execute(
                    "UPDATE ctxstore_audit SET reverted_by = ? WHERE context_id = ? "
                    "AND version >= ? AND version < ? AND reverted_by IS NULL",
                    (rv.by, rv.context_id.hex, rv.from_version, rv.by),
                )
            self._insert_tracking(c, Tracking(TRACKING_NAME, upto))

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
        clause, params = _sql_filter(where, "?")
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
            return [_row(r) for r in c.fetchall()]


class PostgresAuditView(PostgresTrackingRecorder, AuditView):
    """The audit index in the store's PostgreSQL schema."""

    def __init__(self, datastore: PostgresDatastore, events_table: str) -> None:
        super().__init__(datastore, tracking_table_name="ctxstore_audit_tracking")
        schema = Identifier(datastore.schema)
        self.table = SQL("{0}.ctxstore_audit").format(schema)
        self.events = SQL("{0}.{1}").format(schema, Identifier(events_table))
        self.sql_create_statements.append(
            SQL(
                "CREATE TABLE IF NOT EXISTS {0} ("
                "position bigint PRIMARY KEY, context_id text NOT NULL, version bigint NOT NULL, "
                "type text NOT NULL, actor text NOT NULL, ts bigint NOT NULL, "
                "batch integer NOT NULL, facts text NOT NULL, reverted_by bigint, "
                "UNIQUE (context_id, version))"
            ).format(self.table)
        )
        self.sql_create_statements.append(
            SQL("ALTER TABLE {0} ADD COLUMN IF NOT EXISTS tenant text").format(self.table)
        )
        for name, cols in (*INDEXES.items(), TENANT_INDEX):
            self.sql_create_statements.append(
                SQL("CREATE INDEX IF NOT EXISTS {0} ON {1} " + cols).format(
                    Identifier(name), self.table
                )
            )

    def _newest(self, tracked: int) -> tuple[int | None, int | None, int | None]:
        newest_row = self._fetch(SQL("SELECT MAX(position) FROM {0}").format(self.table), [])
        newest = SQL("SELECT MAX(notification_id) FROM {0}").format(self.events)
        upto = self._fetch(newest + SQL(" WHERE notification_id <= %s"), [tracked])
        return newest_row[0][0], upto[0][0], self._fetch(newest, [])[0][0]

    def reset(self) -> None:
        tracking = SQL("{0}.{1}").format(
            Identifier(self.datastore.schema), Identifier(self.tracking_table_name)
        )
        with self.datastore.transaction(commit=True) as curs:
            curs.execute(SQL("DELETE FROM {0}").format(self.table))
            curs.execute(
                SQL("DELETE FROM {0} WHERE application_name = %s").format(tracking),
                (TRACKING_NAME,),
            )

    def project(self, rows: Sequence[AuditRow], reverts: Sequence[Revert], upto: int) -> None:
        with self.datastore.transaction(commit=True) as curs:
            curs.executemany(
                SQL(
                    "INSERT INTO {0} (position, context_id, version, type, actor, ts, batch, "
                    "facts, tenant) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"
                ).format(self.table),
                [_params(r) for r in rows],
            )
            for rv in reverts:
                curs.execute(
                    SQL(
                        "UPDATE {0} SET reverted_by = %s WHERE context_id = %s "
                        "AND version >= %s AND version < %s AND reverted_by IS NULL"
                    ).format(self.table),
                    (rv.by, rv.context_id.hex, rv.from_version, rv.by),
                )
            self._insert_tracking(curs, Tracking(TRACKING_NAME, upto))

    def query(
        self, where: AuditFilter, after: int, limit: int
    ) -> list[tuple[AuditRow, int | None]]:
        return [_row(r) for r in self._fetch(*self._select(where, after, limit))]

    def explain(self, where: AuditFilter, after: int, limit: int) -> str:
        """PostgreSQL's plan for a query (the benchmark prints which index answers it)."""
        statement, params = self._select(where, after, limit)
        return "\n".join(str(r[0]) for r in self._fetch(SQL("EXPLAIN ") + statement, params))

    def _select(self, where: AuditFilter, after: int, limit: int) -> tuple[Composed, list[Any]]:
        clause, params = _sql_filter(where, "%s")
        statement = SQL(
            "SELECT " + COLUMNS + " FROM {0} WHERE position > %s" + clause
            + " ORDER BY position LIMIT %s"
        ).format(self.table)  # fmt: skip
        return statement, [after, *params, limit]

    def event_rows(self, after: int, limit: int) -> list[PositionedRow]:
        statement = SQL(
            "SELECT notification_id, replace(originator_id::text, '-', ''), originator_version, "
            "topic, state FROM {0} WHERE notification_id > %s ORDER BY notification_id LIMIT %s"
        ).format(self.events)
        return self._fetch(statement, [after, limit])

    def context_rows(self, context_hex: str, after_version: int, limit: int) -> list[Row]:
        statement = SQL(
            "SELECT replace(originator_id::text, '-', ''), originator_version, topic, state "
            "FROM {0} WHERE originator_id = %s AND originator_version > %s "
            "ORDER BY originator_version LIMIT %s"
        ).format(self.events)
        return self._fetch(statement, [UUID(context_hex), after_version, limit])

    def indexed_heads(self, context_hex: str | None = None) -> dict[str, int]:
        where = SQL("WHERE context_id = %s ") if context_hex else SQL("")
        statement = SQL("SELECT context_id, MAX(version) FROM {0} {1}GROUP BY context_id").format(
            self.table, where
        )
        return dict(self._fetch(statement, [context_hex] if context_hex else []))

    def _fetch(self, statement: Composed, params: list[Any]) -> list[Any]:
        """Rows as tuples; binary, so bytea arrives as it is stored, not hex-encoded."""
        with (
            self.datastore.get_connection() as conn,
            conn.cursor(row_factory=tuple_row, binary=True) as c,
        ):
            c.execute(statement, params)
            return c.fetchall()


class MemoryAuditView(POPOTrackingRecorder, AuditView):
    """The audit index of a memory:// store, as a list."""

    def __init__(self, recorder: Any) -> None:
        super().__init__()
        self.recorder = recorder
        self._rows: list[AuditRow] = []
        self._reverted: dict[tuple[UUID, int], int] = {}
        self._rows_lock = threading.Lock()

    def event_rows(self, after: int, limit: int) -> list[PositionedRow]:
        found = self.recorder.select_notifications(after + 1, limit)
        return [(n.id, n.originator_id.hex, n.originator_version, n.topic, n.state) for n in found]

    def context_rows(self, context_hex: str, after_version: int, limit: int) -> list[Row]:
        found = self.recorder.select_events(UUID(context_hex), gt=after_version, limit=limit)
        return [(s.originator_id.hex, s.originator_version, s.topic, s.state) for s in found]

    def indexed_heads(self, context_hex: str | None = None) -> dict[str, int]:
        heads: dict[str, int] = {}
        with self._rows_lock:
            for r in self._rows:
                if context_hex is None or r.context_id.hex == context_hex:
                    heads[r.context_id.hex] = max(heads.get(r.context_id.hex, 0), r.version)
        return heads

    def project(self, rows: Sequence[AuditRow], reverts: Sequence[Revert], upto: int) -> None:
        with self._rows_lock:
            self.insert_tracking(Tracking(TRACKING_NAME, upto))  # raises if not ahead
            self._rows.extend(rows)
            for rv in reverts:
                for v in range(rv.from_version, rv.by):
                    self._reverted.setdefault((rv.context_id, v), rv.by)

    def query(
        self, where: AuditFilter, after: int, limit: int
    ) -> list[tuple[AuditRow, int | None]]:
        found = []
        with self._rows_lock:
            for r in self._rows:
                if r.position <= after or not _matches(r, where):
                    continue
                found.append((r, self._reverted.get((r.context_id, r.version))))
                if len(found) >= limit:
                    break
        return found


def _matches(r: AuditRow, w: AuditFilter) -> bool:
    return (
        (w.context_id is None or r.context_id == w.context_id)
        and (not w.types or r.type in w.types)
        and (w.actor is None or r.actor == w.actor)
        and (w.tenant is None or r.tenant == w.tenant)
        and (w.since is None or r.timestamp >= w.since)
        and (w.until is None or r.timestamp < w.until)
        and (w.from_version is None or r.version >= w.from_version)
        and (w.to_version is None or r.version <= w.to_version)
    )


def audit_view(recorder: Any, *, create: bool = True) -> AuditView:
    """The audit index beside an application recorder, its tables created (unless not
    `create`: a role that does not own them uses them as their owner created them)."""
    datastore = getattr(recorder, "datastore", None)
    if not isinstance(datastore, SQLiteDatastore | PostgresDatastore):
        return MemoryAuditView(recorder)
    for attempt in range(3):
        view: SQLiteAuditView | PostgresAuditView = (
            SQLiteAuditView(datastore, recorder.events_table_name)
            if isinstance(datastore, SQLiteDatastore)
            else PostgresAuditView(datastore, recorder.events_table_name)
        )
        try:
            if create:
                view.create_table()
        except IntegrityError:
            # SQLite: another process created the tracking table and its migration record
            # between this one's check and insert; a fresh view finds them in place.
            if attempt == 2:
                raise
            continue
        return view
    raise AssertionError("unreachable")


def binary_snapshot_inserts(recorder: Any) -> None:
    """Send a PostgreSQL snapshot recorder's rows in binary, as OrderedPostgresRecorder does
    its events: in text, escaping a large snapshot's bytes takes milliseconds."""
    if not isinstance(recorder, PostgresAggregateRecorder) or isinstance(
        recorder, PostgresApplicationRecorder
    ):
        return
    recorder.insert_events_statement = SQL(
        "INSERT INTO {schema}.{table} AS t (originator_id, originator_version, topic, state)"
        " SELECT originator_id, originator_version, topic, state"
        " FROM unnest(%b::{schema}.{stored_event_type}[])"
    ).format(
        schema=Identifier(recorder.datastore.schema),
        table=Identifier(recorder.events_table_name),
        stored_event_type=Identifier(recorder.stored_event_type_name),
    )


class OrderedPostgresRecorder(PostgresApplicationRecorder):
    """The library's database-function insert, with the events table's EXCLUSIVE lock, and
    behind a context's turn.

    Without the table lock, concurrent inserts may commit out of position order and a reader
    following the sequence would skip an event that commits late. The turn (an advisory
    lock on the context's key, adapters/storage/turns.py): while another session holds it, an
    insert is refused at once (SQLSTATE TURN_HELD_SQLSTATE) instead of losing later.
    """

    def insert_events_on(self, conn: Any, stored_events: Sequence[StoredEvent]) -> None:
        """Insert on a given pooled connection: the one that holds the context's turn
        (the function's shared lock is then its own, not a wait on itself)."""
        pg_events = [
            self.construct_pg_stored_event(e.originator_id, e.originator_version, e.topic, e.state)
            for e in stored_events
        ]
        try:
            with conn.cursor() as curs:
                curs.execute(self.sql_invoke_pg_function_insert_events, (pg_events,), prepare=True)
                curs.fetchall()
        except psycopg.IntegrityError as exc:
            raise IntegrityError(str(exc)) from exc
        except psycopg.Error as exc:
            raise PersistenceError(str(exc)) from exc

    def __init__(self, datastore: PostgresDatastore, **kwargs: Any) -> None:
        super().__init__(datastore, **kwargs)
        locked = SQL(
            "CREATE OR REPLACE FUNCTION "
            "{schema}.{insert_events}(events {schema}.{event}[]) "
            "RETURNS SETOF bigint "
            "LANGUAGE plpgsql "
            "AS "
            "$BODY$"
            # The context's turn key: the first 64 bits of its id (contention.context_lock_key).
            "DECLARE turn bigint := ('x' || left(replace("
            "    (events[1]).originator_id::text, '-', ''), 16))::bit(64)::bigint;"
            "BEGIN"
            "    SET LOCAL lock_timeout = '{lock_timeout}s';"
            # While another writer holds the turn, this insert would lose: say so, at once.
            # (The holder's own session names the turn it holds in {turn_setting}.)
            "    IF coalesce(current_setting('{turn_setting}', true), '') <> turn::text"
            "       AND NOT pg_try_advisory_xact_lock_shared(turn) THEN"
            "        RAISE EXCEPTION '{turn_held}' USING ERRCODE = '{turn_code}';"
            "    END IF;"
            "    LOCK TABLE {schema}.{table} IN EXCLUSIVE MODE;"
            "    NOTIFY {channel};"
            "    RETURN QUERY"
            "    INSERT INTO {schema}.{table} AS t ("
            "    originator_id, originator_version, topic, state)"
            "    SELECT originator_id, originator_version, topic, state"
            "    FROM unnest(events)"
            "    RETURNING notification_id;"
            "END;"
            "$BODY$"
        ).format(
            turn_held=SQL(TURN_HELD),
            turn_setting=SQL(TURN_SETTING),
            turn_code=SQL(TURN_HELD_SQLSTATE),
            insert_events=Identifier(self.pg_function_name_insert_events),
            lock_timeout=self.datastore.lock_timeout,
            channel=Identifier(self.channel_name),
            event=Identifier(self.stored_event_type_name),
            schema=Identifier(self.datastore.schema),
            table=Identifier(self.events_table_name),
        )
        self.sql_create_statements[self.create_insert_function_statement_index] = locked
        # The events go in binary: the text form escapes each state's bytes (a regular
        # expression over every byte) and doubles what travels.
        self.sql_invoke_pg_function_insert_events = SQL(
            "SELECT * FROM {schema}.{insert_events}((%b))"
        ).format(
            schema=Identifier(self.datastore.schema),
            insert_events=Identifier(self.pg_function_name_insert_events),
        )


__all__ = ["AuditFilter", "AuditView", "OrderedPostgresRecorder", "audit_view"]
