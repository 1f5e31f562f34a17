"""Where a moved context's events were audited first: the merged audit shows each once.

A move copies a context's events to its new server, where the audit index numbers them
again, and deletes the events on the server it leaves; their audit rows stay there, the
record of where and when they happened. The new server keeps, per moved context, an
arrival row naming, for every server the context has left, the audit position each of its
versions has there (`seen`). The merged audit shows an event on the first server that
indexed it and passes over its later copies; a version no server had indexed when the
context left (the index lags the commits) is shown where it is indexed next.

While a move is under way the row is pending: the new server's copy is not yet the context
(its old server still shows its events), so the merged audit reads no further on that
server than the copy's first event, as it reads no further than the commit horizon. A
failed move discards the copy and its row. Erasing the context erases its audit rows on
the servers it left too (ShardedStore.erase).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast
from uuid import UUID

from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore
from psycopg.sql import SQL, Identifier

from ctxstore.adapters.storage.postgres_schema import ARRIVALS_TABLE
from ctxstore.adapters.store.parts import parts_of

if TYPE_CHECKING:
    from ctxstore.adapters.store.facade import ContextStore

Seen = dict[str, dict[int, int]]  # server -> version -> audit position there


@dataclass(frozen=True)
class Arrival:
    """A moved context on the server it came to."""

    seen: Seen
    complete: bool

    def shown_elsewhere(self, version: int) -> bool:
        """Whether this version's event is shown where the context was before."""
        return any(version in at for at in self.seen.values())


def postgres_of(store: ContextStore) -> tuple[str, PostgresDatastore]:
    """The schema and connections of a server's store (a shard is a PostgreSQL store:
    ShardedStore refuses any other), where the sharded store keeps its own tables."""
    recorder = cast(PostgresApplicationRecorder, parts_of(store).storage.recorder)
    return recorder.datastore.schema, recorder.datastore


def _table(store: ContextStore) -> Any:
    schema = postgres_of(store)[0]
    return SQL("{0}.{1}").format(Identifier(schema), Identifier(ARRIVALS_TABLE))


def _parsed(raw: Any) -> Seen:
    found = raw if isinstance(raw, dict) else json.loads(raw)
    return {s: {int(v): int(p) for v, p in at.items()} for s, at in found.items()}


def arrivals(store: ContextStore, ids: Iterable[UUID]) -> dict[UUID, Arrival]:
    """The arrival rows of these contexts on this server."""
    wanted = list(set(ids))
    if not wanted:
        return {}
    with postgres_of(store)[1].transaction(commit=False) as c:
        c.execute(
            SQL("SELECT context_id, seen, complete FROM {0} WHERE context_id = ANY(%s)").format(
                _table(store)
            ),
            (wanted,),
        )
        rows = c.fetchall()
    return {UUID(str(r[0])): Arrival(_parsed(r[1]), bool(r[2])) for r in _tuples(rows)}


def _tuples(rows: list[Any]) -> list[tuple[Any, ...]]:
    return [tuple(r.values()) if isinstance(r, dict) else tuple(r) for r in rows]


def begin(store: ContextStore, cid: UUID) -> None:
    """A pending arrival: the copy about to be written is not yet the context."""
    with postgres_of(store)[1].transaction(commit=True) as c:
        c.execute(
            SQL(
                "INSERT INTO {0} (context_id, seen, complete) VALUES (%s, '{{}}', false) "
                "ON CONFLICT (context_id) DO UPDATE SET seen = '{{}}', complete = false, "
                "arrived_at = now()"
            ).format(_table(store)),
            (cid,),
        )


def complete(store: ContextStore, cid: UUID, seen: Seen) -> None:
    """The move is done: the copy is the context, its events seen before are `seen`."""
    payload = json.dumps({s: {str(v): p for v, p in at.items()} for s, at in seen.items()})
    with postgres_of(store)[1].transaction(commit=True) as c:
        c.execute(
            SQL("UPDATE {0} SET seen = %s::jsonb, complete = true WHERE context_id = %s").format(
                _table(store)
            ),
            (payload, cid),
        )


def departed(c: Any, store: ContextStore, cid: UUID, server: str) -> Seen:
    """In the transaction removing a context's events from `server`: where its events are
    shown (the audit positions of its versions there, and where it was before it came,
    from its arrival row, deleted). The audit index is locked against writes first, so no
    row of the context is indexed after this reads them."""
    schema = Identifier(postgres_of(store)[0])
    c.execute(SQL("LOCK TABLE {0}.ctxstore_audit IN SHARE MODE").format(schema))
    c.execute(
        SQL("SELECT version, min(position) FROM {0}.ctxstore_audit WHERE context_id = %s "
            "GROUP BY version").format(schema),
        (cid.hex,),
    )  # fmt: skip
    here = {int(v): int(p) for v, p in _tuples(c.fetchall())}
    c.execute(
        SQL("DELETE FROM {0} WHERE context_id = %s RETURNING seen").format(_table(store)), (cid,)
    )
    before = _tuples(c.fetchall())
    seen = _parsed(before[0][0]) if before else {}
    # Versions shown on an earlier server stay shown there, not at their copies here.
    shown = {v for at in seen.values() for v in at}
    own = {v: p for v, p in here.items() if v not in shown}
    if own:
        seen[server] = seen.get(server, {}) | own
    return seen


def servers_of(store: ContextStore, cid: UUID) -> set[str]:
    """The servers a context's events are shown on besides this one (where it is now)."""
    found = arrivals(store, [cid]).get(cid)
    return set() if found is None else set(found.seen)


def forget(store: ContextStore, cid: UUID) -> None:
    """Erase a context's audit rows left on a server it moved away from."""
    schema = Identifier(postgres_of(store)[0])
    with postgres_of(store)[1].transaction(commit=True) as c:
        c.execute(
            SQL("DELETE FROM {0}.ctxstore_audit WHERE context_id = %s").format(schema),
            (cid.hex,),
        )
