"""PostgreSQL storage parameters of ctxstore's tables, set when a store opens.

- Events up to a page stay in the row (`toast_tuple_target`): PostgreSQL would move any
  state over ~2 KB into TOAST chunks, but our states are compressed already, so that costs
  space and a second lookup on every read.
- The snapshots table is autovacuumed at PostgreSQL's defaults (50 deleted rows plus a fifth
  of the table). The library creates its tables for appends only, telling autovacuum to wait
  for 100 million deleted rows; superseded snapshots are deleted (adapters/storage/snapshot_policy.py),
  and their space should be reused. Its TOAST table follows it.

Each is set only where the table does not have it yet: setting one takes a SHARE UPDATE
EXCLUSIVE lock and rewrites the table's catalog row, which every store opening would
otherwise do. They save space and time, nothing depends on them: where they cannot be set
(a role that does not own the table, a lock not granted within 5 s) the store opens all
the same and PostgreSQL logs a warning.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eventsourcing.postgres import PostgresAggregateRecorder
from psycopg.sql import SQL, Composed, Identifier, Literal

EVENTS_TABLE_OPTIONS = {"toast_tuple_target": "8160"}  # PostgreSQL's largest: a full page
SNAPSHOTS_TABLE_OPTIONS = {
    "autovacuum_vacuum_threshold": "50",
    "autovacuum_vacuum_scale_factor": "0.2",
}


def tune_tables(events: Any, snapshots: Any) -> None:
    """Set the events' and snapshots' tables' storage parameters (PostgreSQL recorders;
    any other recorder is left as it is)."""
    statements = [
        reloptions_statement(r.datastore.schema, r.events_table_name, options)
        for r, options in ((events, EVENTS_TABLE_OPTIONS), (snapshots, SNAPSHOTS_TABLE_OPTIONS))
        if isinstance(r, PostgresAggregateRecorder)
    ]
    if statements:
        with events.datastore.transaction(commit=True) as c:
            for statement in statements:
                c.execute(statement)


def reloptions_statement(schema: str, table: str, options: Mapping[str, str]) -> Composed:
    """One statement setting the table's storage parameters that differ from `options`."""
    wanted = [f"{k}={v}" for k, v in options.items()]
    return SQL(
        "DO $$ BEGIN "
        "IF NOT coalesce((SELECT {wanted}::text[] <@ reloptions FROM pg_class "
        "WHERE oid = format('%I.%I', {schema_name}, {table_name})::regclass), false) THEN "
        "PERFORM set_config('lock_timeout', '5s', true); "
        "ALTER TABLE {schema}.{table} SET ({settings}); "
        "END IF; "
        "EXCEPTION WHEN OTHERS THEN "
        "RAISE WARNING 'ctxstore: storage parameters of %.% not set: %', "
        "{schema_name}, {table_name}, SQLERRM; "
        "END $$"
    ).format(
        wanted=Literal(wanted),
        schema_name=Literal(schema),
        table_name=Literal(table),
        schema=Identifier(schema),
        table=Identifier(table),
        settings=SQL(", ").join(SQL(f"{k} = {v}") for k, v in options.items()),
    )
