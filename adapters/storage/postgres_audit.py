"""PostgreSQL's audit index: rows per event in the store's schema, queried by filter and position.

Appends to different contexts commit concurrently (no table lock), so notification ids may
become visible out of order: id 8 can commit after id 9 was read. The index therefore
follows the commit order, not the id order, with the technique of transactional outboxes
and event stores on PostgreSQL (e.g. eugene-khyst/postgresql-event-sourcing): each event
row records its transaction's id (`commit_xid`, xid8, the column's default
`pg_current_xact_id()`), and a reader takes only rows whose transaction is older than
every transaction still running (`commit_xid < pg_snapshot_xmin(pg_current_snapshot())`),
in (commit_xid, notification_id) order, after the last (commit_xid, notification_id) it
took.

Why no committed event is ever skipped: xid8 values are handed out in increasing order and
never wrap. A transaction with xid below the statement snapshot's xmin has ended, so in
that statement all its rows are visible (committed) or never will be (aborted); no row with
such an xid can appear later. The reader's mark (x, n) was taken below an earlier xmin, so
every event ordered before the mark was complete and read then; every event after it is
read now or, being at or above the horizon, later. Events are numbered by the index as it
takes them (position = the tracked position + 1, ...), so positions only ever grow, and
are gap-free but where a context moved back to this server brings copies of events
indexed here before (their first rows stay). The price: an append becomes visible to audit cursors once
every transaction older than it has ended, so a long-running writing transaction on the
same database holds cursors back (never writers).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import (
    IntegrityError,
    Notification,
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
    Unindexed,
    audit_params,
    audit_row,
    sql_filter,
)
from ctxstore.adapters.storage.codec.chain import Row
from ctxstore.projections.audit import AuditRow, Revert

CURSOR_TABLE = "ctxstore_audit_cursor"  # the mark of the position reached (migration 9)
CURSOR_DDL = (
    "CREATE TABLE IF NOT EXISTS {0} (position bigint PRIMARY KEY, event_xid xid8 NOT NULL, "
    "event_id bigint NOT NULL)"
)
DELETION_LOCK = 0x63747864  # advisory lock key: taken by deletions of events (erasure,
# history removal) alone, by the indexer's stores of pages together
WRITE_WAIT = 15.0  # seconds an audit read waits for an older transaction to end (its
# horizon is the cluster's: a transaction in another database of the server holds it too)


class PostgresAuditView(PostgresTrackingRecorder, AuditView):
    """The audit index in the store's PostgreSQL schema."""

    def __init__(self, datastore: PostgresDatastore, events_table: str) -> None:
        super().__init__(datastore, tracking_table_name="ctxstore_audit_tracking")
        schema = Identifier(datastore.schema)
        self.table = SQL("{0}.ctxstore_audit").format(schema)
        self.cursor = SQL("{0}.{1}").format(schema, Identifier(CURSOR_TABLE))
        self.tracking = SQL("{0}.{1}").format(schema, Identifier(self.tracking_table_name))
        self.events = SQL("{0}.{1}").format(schema, Identifier(events_table))
        # One round trip: the mark of the position (no row at all when it has none), then
        # the events after it below the horizon (one row of nulls when there are none).
        self.sql_unindexed = SQL(
            "SELECT e.notification_id, e.commit_xid::text, e.originator_id, "
            "e.originator_version, e.topic, e.state, "
            # The newest committed transaction and the horizon, in the same snapshot.
            "(SELECT commit_xid FROM {0} ORDER BY commit_xid DESC LIMIT 1)::text, "
            "pg_snapshot_xmin(pg_current_snapshot())::text FROM "
            "(SELECT event_xid AS x, event_id AS n FROM {1} WHERE position = %s "
            " UNION ALL SELECT '0'::xid8, 0 WHERE %s = 0) m "
            "LEFT JOIN LATERAL (SELECT * FROM {0} WHERE (commit_xid, notification_id) > (m.x, m.n) "
            " AND commit_xid < pg_snapshot_xmin(pg_current_snapshot()) "
            " ORDER BY commit_xid, notification_id LIMIT %s) e ON true"
        ).format(self.events, self.cursor)
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
        self.sql_create_statements.append(SQL(CURSOR_DDL).format(self.cursor))
        for name, cols in (*INDEXES.items(), TENANT_INDEX):
            self.sql_create_statements.append(
                SQL("CREATE INDEX IF NOT EXISTS {0} ON {1} " + cols).format(
                    Identifier(name), self.table
                )
            )

    def needs_rebuild(self) -> bool:
        """Whether the rows disagree with the position tracked: its mark missing (the
        tracking record moved), rows beyond it, or the newest event up to its mark without
        a row (the table truncated, its newest rows deleted). Rows that outlive their events
        are not damage (see AuditView.needs_rebuild); an erasure removes both."""
        # One statement, so one snapshot: an indexer committing meanwhile is not damage.
        found = self._fetch(
            SQL(
                "SELECT t.at, (SELECT MAX(position) FROM {0}), c.event_xid::text, c.event_id "
                "FROM (SELECT coalesce(MAX(notification_id), 0) AS at FROM {1} "
                "WHERE application_name = %s) t LEFT JOIN {2} c ON c.position = t.at"
            ).format(self.table, self.tracking, self.cursor),
            [TRACKING_NAME],
        )[0]
        tracked, newest_row = int(found[0]), found[1] or 0
        if newest_row > tracked:
            return True
        if found[2] is None:
            return tracked > 0
        mark = (found[2], int(found[3]))
        unmatched = self._fetch(
            SQL(
                "SELECT NOT EXISTS (SELECT 1 FROM {0} a WHERE a.context_id = "
                "replace(e.originator_id::text, '-', '') AND a.version = e.originator_version) "
                "FROM {1} e WHERE (e.commit_xid, e.notification_id) <= (%s::xid8, %s) "
                "ORDER BY e.commit_xid DESC, e.notification_id DESC LIMIT 1"
            ).format(self.table, self.events),
            [mark[0], mark[1]],
        )
        return bool(unmatched and unmatched[0][0])

    def unindexed(self, recorder: Any, position: int, limit: int) -> Unindexed:
        """Events committed after the index's mark and below the horizon of transactions
        still running, in commit-safe order, numbered from position + 1. When an event
        committed before this read (by any process) is not yet below the horizon (an older
        transaction still runs), waits for it a little: a reader sees every write that was
        acknowledged before it asked, its own and other processes'."""
        deadline = time.monotonic() + WRITE_WAIT
        target: int | None = None  # the newest transaction committed when the read began
        while True:
            found = self._fetch(self.sql_unindexed, [position, position, limit])
            if not found:  # another indexer moved on (older marks are deleted)
                raise IntegrityError(f"the audit index has no mark at position {position}")
            rows = [r for r in found if r[0] is not None]
            newest, horizon = found[0][6], int(found[0][7])
            if target is None:
                target = int(newest) if newest is not None else 0
            if len(rows) == limit or target < horizon or time.monotonic() > deadline:
                break
            time.sleep(0.002)
        entries = [
            (position + i, Notification(id=r[0], originator_id=r[2], originator_version=r[3],
                                        topic=r[4], state=bytes(r[5])))
            for i, r in enumerate(rows, start=1)
        ]  # fmt: skip
        return Unindexed(entries, (rows[-1][1], rows[-1][0]) if rows else None)

    def reset(self) -> None:
        tracking = self.tracking
        with self.datastore.transaction(commit=True) as curs:
            curs.execute(SQL("DELETE FROM {0}").format(self.table))
            curs.execute(SQL("DELETE FROM {0}").format(self.cursor))
            curs.execute(
                SQL("DELETE FROM {0} WHERE application_name = %s").format(tracking),
                (TRACKING_NAME,),
            )

    def project(
        self, rows: Sequence[AuditRow], reverts: Sequence[Revert], upto: int, mark: Any,
        ids: Sequence[int],
    ) -> None:  # fmt: skip
        if mark is None:
            raise IntegrityError("an audit page on PostgreSQL needs its mark in commit order")
        with self.datastore.transaction(commit=True) as curs:
            # A deletion of events committed since the page was read is seen by the next
            # statement; one not yet begun waits for this transaction (DELETION_LOCK).
            curs.execute("SELECT pg_advisory_xact_lock_shared(%s)", (DELETION_LOCK,))
            curs.execute(
                SQL("SELECT notification_id FROM {0} WHERE notification_id = ANY(%s)")
                .format(self.events), (list(ids),),
            )  # fmt: skip
            stored = {r["notification_id"] for r in curs.fetchall()}
            rows = [r for r, n in zip(rows, ids, strict=True) if n in stored]
            curs.executemany(
                SQL(
                    "INSERT INTO {0} (position, context_id, version, type, actor, ts, batch, "
                    "facts, tenant) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) "
                    # A context moved back to a server it left: its events indexed here
                    # then keep their rows (shards/arrivals.py); their copies leave a gap.
                    "ON CONFLICT (context_id, version) DO NOTHING"
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
            # The mark of the new position (its primary key also refuses a racing indexer),
            # and no older ones: only the newest is read.
            curs.execute(
                SQL("INSERT INTO {0} (position, event_xid, event_id) VALUES (%s, %s::xid8, %s)")
                .format(self.cursor), (upto, mark[0], mark[1]),
            )  # fmt: skip
            curs.execute(SQL("DELETE FROM {0} WHERE position < %s").format(self.cursor), (upto,))

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
