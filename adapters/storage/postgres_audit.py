"""PostgreSQL's audit index: rows per event in the store's schema, queried by filter and position."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import (
    Tracking,
)
from eventsourcing.postgres import (
    PostgresDatastore,
    PostgresTrackingRecorder,
)
from psycopg.rows import tuple_row
from psycopg.sql import SQL, Composed, Identifier

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
from ctxstore.projections.audit import AuditRow, Revert


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
                [audit_params(r) for r in self.sealed(rows)],
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
        return self.opened([audit_row(r) for r in self._fetch(*self._select(where, after, limit))])

    def last_writes(self) -> list[tuple[str, int, str | None, int]]:
        statement = SQL(
            "SELECT context_id, MAX(ts), MAX(tenant), MAX(version) FROM {0} GROUP BY context_id"
        ).format(self.table)
        return [(r[0], int(r[1]), r[2], int(r[3])) for r in self._fetch(statement, [])]

    def has_plain_rows(self) -> bool:
        statement = SQL("SELECT 1 FROM {0} WHERE facts NOT LIKE 'sealed:%%' LIMIT 1").format(
            self.table
        )
        return bool(self._fetch(statement, []))

    def explain(self, where: AuditFilter, after: int, limit: int) -> str:
        """PostgreSQL's plan for a query (the benchmark prints which index answers it)."""
        statement, params = self._select(where, after, limit)
        return "\n".join(str(r[0]) for r in self._fetch(SQL("EXPLAIN ") + statement, params))

    def _select(self, where: AuditFilter, after: int, limit: int) -> tuple[Composed, list[Any]]:
        clause, params = sql_filter(self.hidden(where), "%s")
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
