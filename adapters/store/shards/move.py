"""Moving one context to another server while every other context goes on.

1. Take the context's turn on its server (an advisory lock on its key, the one writers
   queue on under contention, adapters/storage/turns.py): from now on an insert to it is
   refused at once and its writers queue. Writers of other contexts never see it.
2. Copy its events as they are (ids, versions, timestamps, hash chains: the export and
   import of transfer.py, attachments with them) to the target, and check that the
   copy exports exactly as the source does.
3. On the source, in one transaction: a tombstone (`ctxstore_moved`, which the insert
   function checks, so a writer holding an old placement is refused, re-reads it and
   goes to the target) and the deletion of the context's events, snapshots, idempotency
   keys and attachment references (its audit rows stay: the record of what happened there). In an encrypted store whose servers keep
   their own vaults, the source's copy of the context's data key is destroyed (its old
   rows in that server's WAL and backups stay unreadable). Then the placement names the
   target.
4. Release the turn: the queued writers are refused by the tombstone and retry there.

Reads go on from the source until step 3, then from the target: a router whose cached
placement is stale finds the context missing (or moved) and reads the placement again.
The merged audit shows each of the moved context's events once, where it was indexed first:
the source keeps their audit rows and the target records where they are (arrivals.py). A copy that fails (the target stops, or the
copy does not match) is removed from the target and the context stays on its source.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, cast
from uuid import UUID

from eventsourcing.postgres import PostgresAggregateRecorder, PostgresApplicationRecorder
from psycopg.sql import SQL, Identifier

from ctxstore.adapters.keys.cipher import key_name
from ctxstore.adapters.storage.postgres_schema import MOVED_TABLE
from ctxstore.adapters.storage.retention_rows import CHECKPOINTS_TABLE, RETENTION_TABLE
from ctxstore.adapters.store.parts import parts_of
from ctxstore.adapters.store.shards import arrivals
from ctxstore.domain.errors import DamagedContextError, StoreUnavailableError

if TYPE_CHECKING:
    from ctxstore.adapters.store.facade import ContextStore
    from ctxstore.adapters.store.shards.store import ShardedStore

log = logging.getLogger(__name__)
# Tables holding a context's rows besides events and snapshots: (table, column, as hex).
CONTEXT_ROWS = (  # (its arrival row: arrivals.departed)
    ("ctxstore_idempotency", "context"),
    ("ctxstore_blob_refs", "context_id"),
    (CHECKPOINTS_TABLE, "context_id"),
)


def move(sharded: ShardedStore, cid: UUID, to: str) -> str:
    """Move `cid` to server `to`; returns the server it was on."""
    source_name = sharded.shard_of(cid)
    if source_name == to:
        return source_name
    source, target = sharded.stores[source_name], sharded.stores[to]
    with parts_of(source).storage.turns.turn(cid, True) as turn:
        if turn is None:
            raise StoreUnavailableError(f"context {cid}: its writers did not let it move in time")
        lines = list(source.export_events(cid))
        _clear_tombstone(target, cid)
        arrivals.begin(target, cid)
        try:
            target.import_events(lines)
            if list(target.export_events(cid)) != lines:  # events, chains, attachments alike
                raise DamagedContextError(
                    f"context {cid}: the copy on {to} does not match its source"
                )
            _carry_policy(source, target, cid)
        except BaseException:
            _remove(target, cid, None)  # the context stays where it was, whole
            raise
        seen = _remove(source, cid, to, source_name)
        arrivals.complete(target, cid, seen)
        keys = parts_of(source).storage.keys
        if keys is not None and sharded.settings.key_vault is None:
            # Each server keeps its own vault: the source's copy of the context's data key
            # would still open its old rows in that server's WAL and backups.
            keys.keys.destroy([key_name(cid)])
        sharded.directory.place(cid, to)
    parts_of(source).core.cache.drop(cid)
    log.info("context %s moved from server %s to %s", cid, source_name, to)
    return source_name


def _tables(store: ContextStore) -> tuple[Identifier, PostgresApplicationRecorder]:
    schema, _ = arrivals.postgres_of(store)
    return Identifier(schema), cast(PostgresApplicationRecorder, parts_of(store).storage.recorder)


def _carry_policy(source: ContextStore, target: ContextStore, cid: UUID) -> None:
    """The context's own retention policy goes with it (the source's row goes with the
    rest of its rows, below)."""
    rows = parts_of(source).storage.retention
    there = parts_of(target).storage.retention
    if rows is None or there is None:
        return
    scope = f"context:{cid.hex}"
    for found, expire_after, keep_latest, _set_at, actor in rows.policies():
        if found == scope:
            there.set(scope, expire_after, keep_latest, actor)


def _clear_tombstone(store: ContextStore, cid: UUID) -> None:
    """A context moved away from this server before may come back."""
    schema, recorder = _tables(store)
    with recorder.datastore.transaction(commit=True) as c:
        c.execute(
            SQL("DELETE FROM {0}.{1} WHERE context_id = %s").format(
                schema, Identifier(MOVED_TABLE)
            ),
            (cid,),
        )


def _remove(store: ContextStore, cid: UUID, to: str | None, name: str = "") -> arrivals.Seen:
    """Tombstone (naming server `to`; none for a failed copy's removal) and remove the
    context's rows on the server it leaves, in one transaction; returns where its events
    were seen (arrivals.py)."""
    schema, recorder = _tables(store)
    snapshots = cast(PostgresAggregateRecorder, parts_of(store).storage.snapshots.recorder)
    with recorder.datastore.transaction(commit=True) as c:
        if to is not None:
            c.execute(
                SQL("INSERT INTO {0}.{1} (context_id, shard) VALUES (%s, %s) ON CONFLICT "
                    "(context_id) DO UPDATE SET shard = excluded.shard, moved_at = now()")
                .format(schema, Identifier(MOVED_TABLE)), (cid, to),
            )  # fmt: skip
        seen = arrivals.departed(c, store, cid, name)
        for table in (recorder.events_table_name, snapshots.events_table_name):
            c.execute(
                SQL("DELETE FROM {0}.{1} WHERE originator_id = %s").format(
                    schema, Identifier(table)
                ),
                (cid,),
            )
        c.execute(
            SQL("DELETE FROM {0}.{1} WHERE scope = %s").format(schema, Identifier(RETENTION_TABLE)),
            (f"context:{cid.hex}",),
        )
        for table, column in CONTEXT_ROWS:
            value = str(cid) if column == "context" else cid.hex
            c.execute(
                SQL("DELETE FROM {0}.{1} WHERE {2} = %s").format(
                    schema, Identifier(table), Identifier(column)
                ),
                (value,),
            )
    return seen
