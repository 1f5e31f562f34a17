"""PostgreSQL's events write path: the library's database-function insert without its table
lock, behind a context's turn and refusing contexts moved to another server; snapshots
sent in binary."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

import psycopg
from eventsourcing.persistence import (
    IntegrityError,
    InterfaceError,
    OperationalError,
    PersistenceError,
    StoredEvent,
)
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore
from eventsourcing.utils import retry
from psycopg.sql import SQL, Composed, Identifier

from ctxstore.adapters.storage.async_events import after_rows
from ctxstore.adapters.storage.erasers import TABLE as ERASURES_TABLE
from ctxstore.adapters.storage.postgres_schema import MOVED_TABLE
from ctxstore.adapters.storage.turns import (
    GONE,
    GONE_SQLSTATE,
    MOVED,
    MOVED_SQLSTATE,
    TURN_HELD,
    TURN_HELD_SQLSTATE,
    TURN_SETTING,
)


class OrderedPostgresRecorder(PostgresApplicationRecorder):
    """The library's database-function insert, without its table lock, and behind a
    context's turn.

    The library locks the events table so that notification ids commit in order; here they
    need not: a context's versions are its order (the primary key refuses a second writer
    of a version), and the audit index reads across contexts in commit order by each row's
    transaction id (postgres_audit.py). The turn (an advisory lock on the context's key,
    adapters/storage/turns.py): while another session holds it, an insert is refused at
    once (SQLSTATE TURN_HELD_SQLSTATE) instead of losing later.
    """

    def sql_insert_rows(self, n: int, checked: bool = False) -> str:
        """The insert function called with `n` events given as row parameters (originator
        id, version, topic, state each, in binary), made once for each `n`.

        Scalar parameters rather than one array of the composite type: psycopg builds a
        dumper for a composite array on every call, which cost more than the rest of the
        client's work on an append. `checked`: two parameters come first, the context's hex
        id and how many times it had been erased when the writer read its state; when the
        count is no longer that, the function gets no events and stores none (rows_stored
        then raises).
        """
        found = self._rows_sql.get((n, checked))
        if found is None:
            schema = Identifier(self.datastore.schema)
            row = SQL("ROW(%b, %b, %b, %b)::{0}.{1}").format(
                schema, Identifier(self.stored_event_type_name)
            )
            events = SQL("ARRAY[{0}]").format(SQL(", ").join([row] * n))
            if checked:
                events = SQL(
                    "CASE WHEN (SELECT count(*) FROM {0}.{1} WHERE context_id = %b) = %b "
                    "THEN {2} END"
                ).format(schema, Identifier(ERASURES_TABLE), events)
            found = (
                SQL("SELECT * FROM {0}.{1}({2})")
                .format(schema, Identifier(self.pg_function_name_insert_events), events)
                .as_string()
            )
            self._rows_sql[(n, checked)] = found
        return found

    @staticmethod
    def rows_of(stored_events: Sequence[StoredEvent], erasures: int | None = None) -> list[Any]:
        """The parameters of sql_insert_rows (checked when `erasures` is given)."""
        params: list[Any] = []
        if erasures is not None:
            params.extend((_hex(stored_events[0].originator_id), erasures))
        for e in stored_events:
            params.extend((e.originator_id, e.originator_version, e.topic, e.state))
        return params

    @staticmethod
    def rows_stored(rows: Sequence[Any], erasures: int | None) -> None:
        """Raise GONE when a checked insert stored nothing (the context was erased since the
        writer read its state, and maybe made again under its id)."""
        if erasures is not None and not rows:
            raise IntegrityError(GONE)

    def erasures_of(self, cid: UUID) -> int:
        with self.datastore.get_connection() as conn, conn.cursor() as curs:
            curs.execute(
                SQL("SELECT count(*) AS n FROM {0}.{1} WHERE context_id = %s").format(
                    Identifier(self.datastore.schema), Identifier(ERASURES_TABLE)
                ),
                (cid.hex,),
            )
            found = curs.fetchone()
            return int(found["n"]) if found else 0

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        """The library's insert (its errors, its retries: storage/postgres_bounds.py
        bounds them), with the events as row parameters; `erasures` as sql_insert_rows."""
        if not stored_events:
            return None
        with self.datastore.get_connection() as conn, conn.cursor() as curs:
            rows = self._insert_rows(curs, stored_events, kwargs.get("erasures"))
        return [r[self.pg_function_name_insert_events] for r in rows]

    def _insert_rows(
        self, curs: Any, stored_events: Sequence[StoredEvent], erasures: int | None
    ) -> list[Any]:
        """Run the insert function on a cursor; the rows it returned (raises GONE when a
        checked insert stored nothing)."""
        curs.execute(
            self.sql_insert_rows(len(stored_events), erasures is not None),
            self.rows_of(stored_events, erasures), prepare=True,
        )  # fmt: skip
        rows: list[Any] = curs.fetchall()
        self.rows_stored(rows, erasures)
        return rows

    def sql_select_after(self) -> Composed:
        """A context's events after a version: (version, topic, state), in order."""
        return SQL(
            "SELECT originator_version, topic, state FROM {0}.{1} "
            "WHERE originator_id = %s AND originator_version > %s ORDER BY originator_version"
        ).format(Identifier(self.datastore.schema), Identifier(self.events_table_name))

    def sql_select_after_with_erasures(self) -> Composed:
        """sql_select_after with how many times the context was erased on every row (one
        row with no event when none follows): parameters hex id, id, version."""
        return SQL(
            "SELECT e.originator_version, e.topic, e.state, c.n FROM (SELECT count(*) AS n "
            "FROM {0}.{1} WHERE context_id = %s) AS c LEFT JOIN {0}.{2} AS e "
            "ON e.originator_id = %s AND e.originator_version > %s ORDER BY 1"
        ).format(
            Identifier(self.datastore.schema), Identifier(ERASURES_TABLE),
            Identifier(self.events_table_name),
        )  # fmt: skip

    def select_after(self, cid: UUID, gt: int) -> tuple[list[StoredEvent], int]:
        """The context's events after version `gt`, and how many times it was erased, read
        in one statement (a cached state's catch-up)."""
        # One statement, autocommit (a transaction around it would cost two round trips).
        with self.datastore.get_connection() as conn, conn.cursor() as curs:
            curs.execute(self.sql_select_after_with_erasures(), (cid.hex, cid, gt), prepare=True)
            rows = curs.fetchall()
        return after_rows(cid, [tuple(r.values()) for r in rows])

    def insert_events_on(
        self, conn: Any, stored_events: Sequence[StoredEvent], erasures: int | None = None
    ) -> None:
        """Insert on a given pooled connection: the one that holds the context's turn
        (the function's shared lock is then its own, not a wait on itself)."""
        try:
            with conn.cursor() as curs:
                self._insert_rows(curs, stored_events, erasures)
        except psycopg.IntegrityError as exc:
            raise IntegrityError(str(exc)) from exc
        except psycopg.Error as exc:
            raise PersistenceError(str(exc)) from exc

    def __init__(self, datastore: PostgresDatastore, **kwargs: Any) -> None:
        super().__init__(datastore, **kwargs)
        self._rows_sql: dict[tuple[int, bool], str] = {}
        locked = SQL(
            "CREATE OR REPLACE FUNCTION "
            "{schema}.{insert_events}(events {schema}.{event}[]) "
            "RETURNS SETOF bigint "
            "LANGUAGE plpgsql "
            "AS "
            "$BODY$"
            # The context's turn key: the first 64 bits of its id (turns.context_lock_key).
            "DECLARE turn bigint := ('x' || left(replace("
            "    (events[1]).originator_id::text, '-', ''), 16))::bit(64)::bigint;"
            "BEGIN"
            "    SET LOCAL lock_timeout = '{lock_timeout}s';"
            # Moved to another server (adapters/store/shards/move.py): refused, so that a
            # writer with an old placement reads it again.
            "    IF EXISTS (SELECT 1 FROM {schema}.{moved} m"
            "               WHERE m.context_id = (events[1]).originator_id) THEN"
            "        RAISE EXCEPTION '{moved_text}' USING ERRCODE = '{moved_code}';"
            "    END IF;"
            # While another writer holds the turn, this insert would lose: say so, at once.
            # (The holder's own session names the turn it holds in {turn_setting}.)
            "    IF coalesce(current_setting('{turn_setting}', true), '') <> turn::text"
            "       AND NOT pg_try_advisory_xact_lock_shared(turn) THEN"
            "        RAISE EXCEPTION '{turn_held}' USING ERRCODE = '{turn_code}';"
            "    END IF;"
            # The version before the first must be there: an erasure (which takes the turn
            # exclusively, so never between this check and the commit) left none.
            "    IF (events[1]).originator_version > 1 AND NOT EXISTS ("
            "        SELECT 1 FROM {schema}.{table} p"
            "        WHERE p.originator_id = (events[1]).originator_id"
            "          AND p.originator_version = (events[1]).originator_version - 1) THEN"
            "        RAISE EXCEPTION '{gone}' USING ERRCODE = '{gone_code}';"
            "    END IF;"
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
            gone=SQL(GONE.replace("'", "''")),
            gone_code=SQL(GONE_SQLSTATE),
            moved=Identifier(MOVED_TABLE),
            moved_text=SQL(MOVED),
            moved_code=SQL(MOVED_SQLSTATE),
            turn_setting=SQL(TURN_SETTING),
            turn_code=SQL(TURN_HELD_SQLSTATE),
            insert_events=Identifier(self.pg_function_name_insert_events),
            lock_timeout=self.datastore.lock_timeout,
            event=Identifier(self.stored_event_type_name),
            schema=Identifier(self.datastore.schema),
            table=Identifier(self.events_table_name),
        )
        self.sql_create_statements[self.create_insert_function_statement_index] = locked


def _hex(originator_id: UUID | str) -> str:
    return originator_id.hex if isinstance(originator_id, UUID) else UUID(originator_id).hex


def binary_snapshot_inserts(recorder: Any) -> None:
    """Send a PostgreSQL snapshot recorder's rows in binary, as OrderedPostgresRecorder does
    its events (sql_insert_rows): in text, escaping a large snapshot's bytes (a regular
    expression over every byte) takes milliseconds and doubles what travels."""
    recorder.insert_events_statement = SQL(
        "INSERT INTO {schema}.{table} AS t (originator_id, originator_version, topic, state)"
        " SELECT originator_id, originator_version, topic, state"
        " FROM unnest(%b::{schema}.{stored_event_type}[])"
    ).format(
        schema=Identifier(recorder.datastore.schema),
        table=Identifier(recorder.events_table_name),
        stored_event_type=Identifier(recorder.stored_event_type_name),
    )
