"""Where each context lives: a placement table, filled by rendezvous hashing.

A context is placed, when created, on the shard whose name hashes highest with its id
(rendezvous hashing: balanced, and a shard added later takes only its share of new
contexts); the choice is recorded in the placement table, on the first server (the
directory). The table, not the hash, is the truth: `move` changes one row, and no other
context is touched or paused. Each server names itself once (`ctxstore_shard`), so the
list of URLs may be reordered or a server's address changed without moving anything.

Routers cache placements; a stale one is found out by the shard itself (the context is
not there, or a tombstone says where it went) and re-read.
"""

from __future__ import annotations

import hashlib
import threading
import uuid
from collections import OrderedDict
from typing import Any
from uuid import UUID

from psycopg.sql import SQL, Identifier

PLACEMENT_TABLE = "ctxstore_placement"
SHARD_TABLE = "ctxstore_shard"
CACHED = 100_000  # placements a router keeps


def rendezvous(cid: UUID, names: list[str]) -> str:
    """The shard a new context goes to: the highest hash of (name, id)."""
    return max(names, key=lambda n: hashlib.sha256(f"{n}/{cid.hex}".encode()).digest())


class Directory:
    """The placement table (on the directory server) and this router's cache of it."""

    def __init__(self, connect: Any, schema: str) -> None:
        self._connect = connect  # () -> a pooled connection context of the directory
        self.table = SQL("{0}.{1}").format(Identifier(schema), Identifier(PLACEMENT_TABLE))
        self._cache: OrderedDict[UUID, str] = OrderedDict()
        self._lock = threading.Lock()

    def place(self, cid: UUID, shard: str) -> None:
        with self._connect() as conn:
            conn.execute(
                SQL("INSERT INTO {0} (context_id, shard) VALUES (%s, %s) ON CONFLICT "
                    "(context_id) DO UPDATE SET shard = excluded.shard, placed_at = now()")
                .format(self.table), (cid.hex, shard),
            )  # fmt: skip
        self._remember(cid, shard)

    def shard_of(self, cid: UUID, *, fresh: bool = False) -> str | None:
        """The shard holding `cid`, None when the directory has no row for it."""
        if not fresh:
            with self._lock:
                found = self._cache.get(cid)
            if found is not None:
                return found
        with self._connect() as conn:
            row = conn.execute(
                SQL("SELECT shard FROM {0} WHERE context_id = %s").format(self.table), (cid.hex,)
            ).fetchone()
        if row is None:
            return None
        shard = str(row["shard"])  # the library's connections return rows as dicts
        self._remember(cid, shard)
        return shard

    def forget(self, cid: UUID) -> None:
        with self._lock:
            self._cache.pop(cid, None)

    def drop(self, cid: UUID) -> None:
        """Remove a context's row (it was erased)."""
        with self._connect() as conn:
            conn.execute(
                SQL("DELETE FROM {0} WHERE context_id = %s").format(self.table), (cid.hex,)
            )
        self.forget(cid)

    def counts(self) -> dict[str, int]:
        """Contexts placed on each shard."""
        with self._connect() as conn:
            rows = conn.execute(
                SQL("SELECT shard, count(*) FROM {0} GROUP BY shard").format(self.table)
            ).fetchall()
        return {str(r["shard"]): int(r["count"]) for r in rows}

    def _remember(self, cid: UUID, shard: str) -> None:
        with self._lock:
            self._cache[cid] = shard
            self._cache.move_to_end(cid)
            while len(self._cache) > CACHED:
                self._cache.popitem(last=False)


def server_name(connect: Any, schema: str) -> str:
    """This server's shard name, made on first use."""
    table = SQL("{0}.{1}").format(Identifier(schema), Identifier(SHARD_TABLE))
    with connect() as conn:
        conn.execute(
            SQL("INSERT INTO {0} (name) VALUES (%s) ON CONFLICT DO NOTHING").format(table),
            (uuid.uuid4().hex[:12],),
        )
        row = conn.execute(SQL("SELECT name FROM {0}").format(table)).fetchone()
    return str(row["name"])
