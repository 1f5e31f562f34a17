"""PostgreSQL schema: the versioned migrations, the lock that serializes them, the check
for a role that does not own the tables, and the tables' storage parameters.

Storage parameters, set by the first migration:

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

import json
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.sql import SQL, Composed, Identifier, Literal

from ctxstore.adapters.keys.vault import TABLE as VAULT_TABLE
from ctxstore.adapters.keys.vault import ddl as vault_ddl
from ctxstore.adapters.storage.audit_index import TRACKING_NAME
from ctxstore.adapters.storage.migrations import TABLE as MIGRATIONS_TABLE
from ctxstore.adapters.storage.migrations import Migration
from ctxstore.adapters.storage.notifications import FORGOTTEN
from ctxstore.adapters.storage.postgres_search import create_tables as search_tables
from ctxstore.adapters.storage.retention_rows import lifecycle_tables
from ctxstore.adapters.storage.urls import LIBPQ_PARAMS
from ctxstore.domain.errors import StoreUnavailableError

SCHEMA_LOCK = 0x63747873  # advisory lock key: one process at a time creates the tables
# PostgreSQL tables of a store, the events table first: the library's, the audit index's,
# erasure records and the HTTP service's idempotency keys (an owner's store creates them all).
STORE_TABLES = (
    "ctxstore_events", "ctxstore_snapshots", "ctxstore_audit", "ctxstore_audit_tracking",
    "ctxstore_erasures", "ctxstore_idempotency", "ctxstore_migrations", "ctxstore_blobs",
    "ctxstore_blob_refs", "ctxstore_keys", "ctxstore_tokens", "ctxstore_retention",
    "ctxstore_sweeps", "ctxstore_checkpoints", "ctxstore_audit_cursor",
    "ctxstore_listeners", "ctxstore_shard", "ctxstore_placement", "ctxstore_moved",
    "ctxstore_arrivals",
)  # fmt: skip
ERASURES_DDL = (
    "CREATE TABLE IF NOT EXISTS {0} (context_id text NOT NULL, tenant text, "
    "erased_at double precision NOT NULL, actor text NOT NULL, "
    "reason text NOT NULL, events bigint NOT NULL, snapshots bigint NOT NULL)"
)
IDEMPOTENCY_DDL = (
    "CREATE TABLE IF NOT EXISTS {0} (tenant text NOT NULL, key text NOT NULL, "
    "fingerprint text NOT NULL, status integer, body bytea, "
    "created double precision NOT NULL, context text, PRIMARY KEY (tenant, key))"
)
BLOBS_DDL = (
    "CREATE TABLE IF NOT EXISTS {0} (tenant text NOT NULL, sha256 text NOT NULL, "
    "media_type text NOT NULL, size bigint NOT NULL, width integer, height integer, "
    "data bytea NOT NULL, created double precision NOT NULL, file_ids text, "
    "PRIMARY KEY (tenant, sha256))"
)
BLOB_REFS_DDL = (
    "CREATE TABLE IF NOT EXISTS {0} (context_id text NOT NULL, tenant text NOT NULL, "
    "sha256 text NOT NULL, PRIMARY KEY (context_id, sha256))"
)
BLOB_REFS_INDEX = "CREATE INDEX IF NOT EXISTS ctxstore_blob_refs_by_blob ON {0} (tenant, sha256)"
MIGRATIONS_DDL = (
    "CREATE TABLE IF NOT EXISTS {0} (version integer PRIMARY KEY, description text NOT NULL, "
    "applied_at double precision NOT NULL)"
)

EVENTS_TABLE_OPTIONS = {"toast_tuple_target": "8160"}  # PostgreSQL's largest: a full page
SNAPSHOTS_TABLE_OPTIONS = {
    "autovacuum_vacuum_threshold": "50",
    "autovacuum_vacuum_scale_factor": "0.2",
}


def tune_tables(events: Any, snapshots: Any) -> None:
    """Set the events' and snapshots' tables' storage parameters."""
    with events.datastore.transaction(commit=True) as c:
        for r, options in ((events, EVENTS_TABLE_OPTIONS), (snapshots, SNAPSHOTS_TABLE_OPTIONS)):
            c.execute(reloptions_statement(r.datastore.schema, r.events_table_name, options))


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


def libpq_params(env: dict[str, str]) -> dict[str, str]:
    """The libpq parameters the store URL gave (settings.libpq_params checked them)."""
    found: dict[str, str] = json.loads(env.get(LIBPQ_PARAMS, "{}"))
    return found


def conninfo(env: dict[str, str]) -> str:
    """A libpq connection string for a connection of the store's own (not the pool's)."""
    params: dict[str, Any] = {
        "dbname": env["POSTGRES_DBNAME"],
        "host": env["POSTGRES_HOST"],
        "port": env["POSTGRES_PORT"],
        "user": env["POSTGRES_USER"],
        "password": env["POSTGRES_PASSWORD"] or None,
        "connect_timeout": int(env.get("POSTGRES_CONNECT_TIMEOUT", "10")),
        **libpq_params(env),  # the URL's own: sslmode, host=/socket/dir, ...
    }
    return psycopg.conninfo.make_conninfo("", **params)


def channel(schema: str) -> str:
    """The NOTIFY channel of a schema's events (one store per schema)."""
    return f"ctxstore_events:{schema}"[:63]


NOTIFY_DDL = """
CREATE OR REPLACE FUNCTION {schema}.ctxstore_notify_events() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE heads text;
BEGIN
  SELECT string_agg(DISTINCT originator_id::text, ',') INTO heads FROM new_events;
  IF length(heads) > 7000 THEN heads := '*'; END IF;  -- NOTIFY carries 8,000 bytes at most
  PERFORM pg_notify({channel}, coalesce(heads, '*'));
  RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS ctxstore_events_notify ON {events};
CREATE TRIGGER ctxstore_events_notify AFTER INSERT ON {events}
  REFERENCING NEW TABLE AS new_events FOR EACH STATEMENT
  EXECUTE FUNCTION {schema}.ctxstore_notify_events();
"""


MOVED_TABLE = "ctxstore_moved"  # tombstones of contexts moved to another server
PLACEMENT_DDL = (
    "CREATE TABLE IF NOT EXISTS {0} (context_id text PRIMARY KEY, shard text NOT NULL, "
    "placed_at timestamptz NOT NULL DEFAULT now())"
)
SHARD_DDL = (
    "CREATE TABLE IF NOT EXISTS {0} (name text PRIMARY KEY, "
    "one boolean NOT NULL DEFAULT true UNIQUE CHECK (one))"
)
MOVED_DDL = (
    "CREATE TABLE IF NOT EXISTS {0} (context_id uuid PRIMARY KEY, shard text NOT NULL, "
    "moved_at timestamptz NOT NULL DEFAULT now())"
)
ARRIVALS_TABLE = "ctxstore_arrivals"  # contexts moved here: where their events were seen before
# `seen`: {server: {version: audit position}} of the context's events on the servers it
# left; `complete` is false while the move that brings it is under way (merged_audit.py).
ARRIVALS_DDL = (
    "CREATE TABLE IF NOT EXISTS {0} (context_id uuid PRIMARY KEY, seen jsonb NOT NULL, "
    "complete boolean NOT NULL DEFAULT false, arrived_at timestamptz NOT NULL DEFAULT now())"
)
LISTENERS_TABLE = "ctxstore_listeners"
LISTENERS_DDL = (
    "CREATE TABLE IF NOT EXISTS {0} (context text NOT NULL, listener text NOT NULL, "
    "seen timestamptz NOT NULL, PRIMARY KEY (context, listener))"
)
# Migration 9: notify only when a written context (or any, '*') is followed: a NOTIFY's
# commit takes a database-wide lock, and would serialize the writers the table lock no
# longer does (adapters/storage/notifications.py).
NOTIFY_FOLLOWED_DDL = """
CREATE OR REPLACE FUNCTION {schema}.ctxstore_notify_events() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE heads text;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM {listeners} l WHERE l.seen > now() - interval '{forgotten} s'
                 AND (l.context = '*' OR l.context IN
                      (SELECT replace(originator_id::text, '-', '') FROM new_events))) THEN
    RETURN NULL;
  END IF;
  SELECT string_agg(DISTINCT originator_id::text, ',') INTO heads FROM new_events;
  IF length(heads) > 7000 THEN heads := '*'; END IF;  -- NOTIFY carries 8,000 bytes at most
  PERFORM pg_notify({channel}, coalesce(heads, '*'));
  RETURN NULL;
END $$;
"""


@contextmanager
def schema_lock(env: dict[str, str]) -> Iterator[psycopg.Connection[Any] | None]:
    """On PostgreSQL, hold an advisory lock while the library creates tables and functions;
    yields the connection holding it (None elsewhere).

    Processes starting together would otherwise race: PostgreSQL refuses concurrent
    CREATE OR REPLACE FUNCTION ("tuple concurrently updated") and CREATE TABLE IF NOT EXISTS.
    """
    if env.get("PERSISTENCE_MODULE") != "eventsourcing.postgres":
        yield None
        return
    with psycopg.connect(conninfo(env), autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (SCHEMA_LOCK,))
        try:
            yield conn
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (SCHEMA_LOCK,))


def provisioned_elsewhere(conn: psycopg.Connection[Any], schema: str) -> bool:
    """Whether the store's tables exist and belong to another role: a deployment whose
    schema its owner created (and upgrades), used by a role granted only the tables. Such
    a store opens without running DDL, which only the owner may; raises StoreUnavailable-
    Error naming the tables that role would need and cannot create."""
    rows = conn.execute(
        "SELECT t.name, pg_has_role(c.relowner, 'USAGE') FROM unnest(%s::text[]) AS t(name) "
        "LEFT JOIN pg_namespace n ON n.nspname = %s "
        "LEFT JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = t.name",
        (list(STORE_TABLES), schema),
    ).fetchall()
    owned = {name: owner for name, owner in rows}
    if owned[STORE_TABLES[0]] is not False:  # missing, or ours: create and upgrade as usual
        return False
    missing = [n for n, owner in owned.items() if owner is None and n != MIGRATIONS_TABLE]
    if missing:
        raise StoreUnavailableError(
            f"the store's tables {', '.join(missing)} are missing in schema {schema!r}, and "
            "this role does not own the others: open the store once as their owner, who "
            "creates them"
        )
    return True


def schema_version(conn: psycopg.Connection[Any], schema: str) -> int | None:
    """The highest migration recorded in the schema, None when none is."""
    found = conn.execute(
        "SELECT to_regclass(format('%%I.%%I', %s::text, %s::text)) IS NOT NULL",
        (schema, MIGRATIONS_TABLE),
    ).fetchone()
    if not found or not found[0]:
        return None
    row = conn.execute(
        SQL("SELECT max(version) FROM {0}").format(Identifier(schema, MIGRATIONS_TABLE))
    ).fetchone()
    return None if row is None or row[0] is None else int(row[0])


def record_version(conn: psycopg.Connection[Any], schema: str, migration: Migration) -> None:
    table = Identifier(schema, MIGRATIONS_TABLE)
    conn.execute(SQL(MIGRATIONS_DDL).format(table))
    conn.execute(
        SQL(
            "INSERT INTO {0} (version, description, applied_at) VALUES (%s, %s, %s) "
            "ON CONFLICT (version) DO NOTHING"
        ).format(table),
        (migration.version, migration.description, time.time()),
    )


def _base_tables(backend: Any, events: Any, snapshots: Any) -> None:
    """The library's events and snapshots tables and insert function, the audit index and
    its tracking table (with the tenant column older tables gain), erasures, idempotency
    keys; then the storage parameters above."""
    events.create_table()
    snapshots.create_table()
    backend.audit_view(events).create_table()
    schema = Identifier(events.datastore.schema)
    with events.datastore.transaction(commit=True) as c:
        c.execute(SQL(ERASURES_DDL).format(SQL("{0}.ctxstore_erasures").format(schema)))
        c.execute(SQL(IDEMPOTENCY_DDL).format(SQL("{0}.ctxstore_idempotency").format(schema)))
    tune_tables(events, snapshots)


def _erasure_residue(backend: Any, events: Any, snapshots: Any) -> None:
    """Erasure records say what residue may remain; the events table is autovacuumed at
    PostgreSQL's defaults (the library's setting waits for 100 million deleted rows, so an
    erasure's dead rows would stay in the table files until the next manual VACUUM)."""
    schema = Identifier(events.datastore.schema)
    with events.datastore.transaction(commit=True) as c:
        c.execute(
            SQL("ALTER TABLE {0}.ctxstore_erasures ADD COLUMN IF NOT EXISTS residue text").format(
                schema
            )
        )
        c.execute(
            SQL(
                "ALTER TABLE {0}.{1} RESET (autovacuum_vacuum_threshold, "
                "autovacuum_vacuum_scale_factor)"
            ).format(schema, Identifier(events.events_table_name))
        )


def _erasure_forks(backend: Any, events: Any, snapshots: Any) -> None:
    """Erasure records name the forks erased with a context."""
    with events.datastore.transaction(commit=True) as c:
        c.execute(
            SQL("ALTER TABLE {0}.ctxstore_erasures ADD COLUMN IF NOT EXISTS forks text").format(
                Identifier(events.datastore.schema)
            )
        )


def _blobs(backend: Any, events: Any, snapshots: Any) -> None:
    """Attachments stored once by their hash, and the contexts that refer to them."""
    schema = Identifier(events.datastore.schema)
    refs = SQL("{0}.ctxstore_blob_refs").format(schema)
    with events.datastore.transaction(commit=True) as c:
        c.execute(SQL(BLOBS_DDL).format(SQL("{0}.ctxstore_blobs").format(schema)))
        c.execute(SQL(BLOB_REFS_DDL).format(refs))
        c.execute(SQL(BLOB_REFS_INDEX).format(refs))


def _notify(backend: Any, events: Any, snapshots: Any) -> None:
    """Each insert of events notifies, at commit, the contexts it wrote (live tails)."""
    schema = events.datastore.schema
    with events.datastore.transaction(commit=True) as c:
        c.execute(
            SQL(NOTIFY_DDL).format(
                schema=Identifier(schema), channel=Literal(channel(schema)),
                events=SQL("{0}.{1}").format(
                    Identifier(schema), Identifier(events.events_table_name)
                ),
            )
        )  # fmt: skip


def _keys(backend: Any, events: Any, snapshots: Any) -> None:
    """The vault of data keys (a key per context, wrapped by the KEK)."""
    table = SQL("{0}.{1}").format(Identifier(events.datastore.schema), Identifier(VAULT_TABLE))
    with events.datastore.transaction(commit=True) as c:
        c.execute(SQL(vault_ddl("{0}")).format(table))


def _tokens_and_retention(backend: Any, events: Any, snapshots: Any) -> None:
    """Bearer tokens kept hashed; retention policies and the sweeps that applied them."""
    schema = Identifier(events.datastore.schema)
    with events.datastore.transaction(commit=True) as c:
        for table, ddl in lifecycle_tables():
            c.execute(
                SQL(ddl.replace("{t}", "{0}")).format(
                    SQL("{0}.{1}").format(schema, Identifier(table))
                )
            )


def _blob_keys(backend: Any, events: Any, snapshots: Any) -> None:
    """Attachments under keys of their own (adapters/keys/blob_keys.py): the key sealed per
    referring context, or with the store's key while an upload is referred to by none."""
    schema = Identifier(events.datastore.schema)
    with events.datastore.transaction(commit=True) as c:
        for table in ("ctxstore_blobs", "ctxstore_blob_refs"):
            c.execute(
                SQL("ALTER TABLE {0}.{1} ADD COLUMN IF NOT EXISTS sealed_key text").format(
                    schema, Identifier(table)
                )
            )


def _lock_free_appends(backend: Any, events: Any, snapshots: Any) -> None:
    """Appends without the events table's lock: each event row records its transaction's
    id, and the audit index follows the commit order (adapters/storage/postgres_audit.py).

    Rows written before keep xid 0 (a constant default: adding the column rewrites
    nothing), so they come first, in id order, as they were indexed; the position the index
    reached gets its mark (0, that position). Inserts notify only contexts someone follows
    (the listeners table). The insert function without the lock comes with migration 10,
    which replaces it (it refuses moved contexts too)."""
    from ctxstore.adapters.storage.postgres_audit import CURSOR_DDL, CURSOR_TABLE

    schema = Identifier(events.datastore.schema)
    table = SQL("{0}.{1}").format(schema, Identifier(events.events_table_name))
    cursor = SQL("{0}.{1}").format(schema, Identifier(CURSOR_TABLE))
    tracking = SQL("{0}.ctxstore_audit_tracking").format(schema)
    with events.datastore.transaction(commit=True) as c:
        c.execute(
            SQL("ALTER TABLE {0} ADD COLUMN IF NOT EXISTS commit_xid xid8 NOT NULL DEFAULT '0'")
            .format(table)
        )  # fmt: skip
        c.execute(
            SQL("ALTER TABLE {0} ALTER COLUMN commit_xid SET DEFAULT pg_current_xact_id()")
            .format(table)
        )  # fmt: skip
        c.execute(
            SQL("CREATE INDEX IF NOT EXISTS {0} ON {1} (commit_xid, notification_id)").format(
                Identifier(f"{events.events_table_name}_commit_idx"), table
            )
        )
        c.execute(SQL(CURSOR_DDL).format(cursor))
        listeners = SQL("{0}.{1}").format(schema, Identifier(LISTENERS_TABLE))
        c.execute(SQL(LISTENERS_DDL).format(listeners))
        c.execute(
            SQL(NOTIFY_FOLLOWED_DDL).format(
                schema=schema, listeners=listeners, forgotten=SQL(str(FORGOTTEN)),
                channel=Literal(channel(events.datastore.schema)),
            )
        )  # fmt: skip
        c.execute(
            SQL(
                "INSERT INTO {0} (position, event_xid, event_id) SELECT notification_id, "
                "'0'::xid8, notification_id FROM {1} WHERE application_name = %s "
                "AND notification_id > 0 ON CONFLICT (position) DO NOTHING"
            ).format(cursor, tracking),
            (TRACKING_NAME,),
        )


def _insert_function(events: Any) -> None:
    """(Re)create the events' insert function as this release defines it (the recorder's
    statement: adapters/storage/postgres.py)."""
    statement = events.sql_create_statements[events.create_insert_function_statement_index]
    with events.datastore.transaction(commit=True) as c:
        c.execute(statement)


def _shards(backend: Any, events: Any, snapshots: Any) -> None:
    """Contexts spread over servers (adapters/store/shards/): each server's name, the
    placement (read on the first server), tombstones of contexts moved away, which the
    insert function refuses."""
    schema = Identifier(events.datastore.schema)
    with events.datastore.transaction(commit=True) as c:
        for table, ddl in (("ctxstore_shard", SHARD_DDL), ("ctxstore_placement", PLACEMENT_DDL),
                           (MOVED_TABLE, MOVED_DDL)):  # fmt: skip
            c.execute(SQL(ddl).format(SQL("{0}.{1}").format(schema, Identifier(table))))
    _insert_function(events)


def _arrivals(backend: Any, events: Any, snapshots: Any) -> None:
    """A moved context's events are shown once by the merged audit (shards/arrivals.py)."""
    schema = Identifier(events.datastore.schema)
    with events.datastore.transaction(commit=True) as c:
        c.execute(
            SQL(ARRIVALS_DDL).format(SQL("{0}.{1}").format(schema, Identifier(ARRIVALS_TABLE)))
        )


def _erasures_by_context(backend: Any, events: Any, snapshots: Any) -> None:
    """A context's erasures are counted on every append (storage/backend.erasures_of)."""
    schema = Identifier(events.datastore.schema)
    with events.datastore.transaction(commit=True) as c:
        c.execute(
            SQL("CREATE INDEX IF NOT EXISTS ctxstore_erasures_by_context ON {0}.{1} (context_id)")
            .format(schema, Identifier("ctxstore_erasures"))
        )  # fmt: skip


def _search(backend: Any, events: Any, snapshots: Any) -> None:
    """Search across contexts: the rows with their words (tsvector, GIN), the positions."""
    with events.datastore.transaction(commit=True) as c:
        search_tables(c, events.datastore.schema or "public")


MIGRATIONS = (
    Migration(1, "events, snapshots, audit index, erasures, idempotency keys", _base_tables),
    Migration(2, "erasure records say what residue may remain", _erasure_residue),
    Migration(3, "erasure records name the forks erased with a context", _erasure_forks),
    Migration(4, "attachments stored once by their hash (blobs and references)", _blobs),
    Migration(5, "inserts of events notify the contexts they wrote (live tails)", _notify),
    Migration(6, "a vault of data keys, one per context (envelope encryption)", _keys),
    Migration(7, "hashed tokens; retention policies, sweeps, checkpoints", _tokens_and_retention),
    Migration(8, "attachments under keys of their own, wrapped per context", _blob_keys),
    Migration(
        9, "appends without the table lock; the audit index in commit order", _lock_free_appends
    ),
    Migration(10, "contexts spread over servers: names, placement, tombstones", _shards),
    Migration(11, "moved contexts remember where their events were seen", _arrivals),
    Migration(12, "erasures found by context", _erasures_by_context),
    Migration(13, "search across contexts (tsvector, GIN)", _search),
)
