"""PostgreSQL storage parameters of ctxstore's tables, set once when a store opens.

Each is set only where the table does not have it yet: setting one takes a SHARE UPDATE
EXCLUSIVE lock and rewrites the table's catalog row, which every store opening would
otherwise do. They save space and time, nothing depends on them: where they cannot be set
(a role that does not own the table, a lock not granted within 5 s) the store opens all
the same and PostgreSQL logs a warning.
"""

from __future__ import annotations

from collections.abc import Mapping

from psycopg.sql import SQL, Composed, Identifier, Literal


def reloptions_statement(schema: str, table: str, options: Mapping[str, str]) -> Composed:
    """One statement setting the table's storage parameters that differ from `options`."""
    wanted = [f"{k}={v}" for k, v in options.items()]
    return SQL(
        "DO $$ BEGIN "
        "IF NOT coalesce((SELECT {wanted}::text[] <@ reloptions FROM pg_class "
        "WHERE oid = {name}::regclass), false) THEN "
        "PERFORM set_config('lock_timeout', '5s', true); "
        "ALTER TABLE {schema}.{table} SET ({settings}); "
        "END IF; "
        "EXCEPTION WHEN OTHERS THEN "
        "RAISE WARNING 'ctxstore: storage parameters of % not set: %', {name}, SQLERRM; "
        "END $$"
    ).format(
        wanted=Literal(wanted),
        name=Literal(f'"{schema}"."{table}"'),
        schema=Identifier(schema),
        table=Identifier(table),
        settings=SQL(", ").join(SQL(f"{k} = {v}") for k, v in options.items()),
    )
