"""Idempotency keys: a retried POST with the same key gets the first response, not a second write.

A key is claimed before the request runs (a row with no status), and the response is stored
when it succeeds; a request that fails writes nothing, so its claim is released and a retry
runs again. Keys live in the store's own database, so every service instance sharing it
honours them, and they survive a restart. A claim whose request never finished (the process
died) is taken as lost after `pending_seconds`: the retry then runs again, which is the one
case where a write could repeat — ctxstore cannot tell whether the lost request committed.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from eventsourcing.postgres import PostgresDatastore
from eventsourcing.sqlite import SQLiteDatastore
from psycopg.sql import SQL, Identifier


@dataclass(frozen=True)
class Claimed:
    """What an earlier request under the same key left: its fingerprint and, once done,
    its response (status None: still running)."""

    fingerprint: str
    status: int | None
    body: bytes | None


class IdempotencyKeys(ABC):
    """The keys of one store, per tenant."""

    def __init__(self, ttl_seconds: float, pending_seconds: float) -> None:
        self.ttl = ttl_seconds
        self.pending = pending_seconds

    @abstractmethod
    def claim(self, tenant: str, key: str, fingerprint: str) -> Claimed | None:
        """Claim a key for a request; None when claimed now, else what holds it."""

    @abstractmethod
    def complete(self, tenant: str, key: str, status: int, body: bytes) -> None:
        """Store the response of the request that claimed the key."""

    @abstractmethod
    def release(self, tenant: str, key: str) -> None:
        """Forget a claim whose request wrote nothing."""

    def _expired_before(self) -> tuple[float, float]:
        now = time.time()
        return now - self.ttl, now - self.pending


class SQLiteIdempotencyKeys(IdempotencyKeys):
    def __init__(self, datastore: SQLiteDatastore, ttl: float, pending: float) -> None:
        super().__init__(ttl, pending)
        self.datastore = datastore
        with datastore.transaction(commit=True) as c:
            c.execute(
                "CREATE TABLE IF NOT EXISTS ctxstore_idempotency (tenant TEXT NOT NULL, "
                "key TEXT NOT NULL, fingerprint TEXT NOT NULL, status INTEGER, body BLOB, "
                "created REAL NOT NULL, PRIMARY KEY (tenant, key))"
            )

    def claim(self, tenant: str, key: str, fingerprint: str) -> Claimed | None:
        done_before, pending_before = self._expired_before()
        with self.datastore.transaction(commit=True) as c:
            c.execute(
                "DELETE FROM ctxstore_idempotency WHERE tenant = ? AND key = ? AND "
                "((status IS NOT NULL AND created < ?) OR (status IS NULL AND created < ?))",
                (tenant, key, done_before, pending_before),
            )
            c.execute(
                "INSERT OR IGNORE INTO ctxstore_idempotency (tenant, key, fingerprint, created) "
                "VALUES (?, ?, ?, ?)",
                (tenant, key, fingerprint, time.time()),
            )
            if c.sqlite_cursor.rowcount == 1:
                return None
            c.execute(
                "SELECT fingerprint, status, body FROM ctxstore_idempotency "
                "WHERE tenant = ? AND key = ?",
                (tenant, key),
            )
            row = c.fetchone()
        return Claimed(row[0], row[1], row[2])

    def complete(self, tenant: str, key: str, status: int, body: bytes) -> None:
        with self.datastore.transaction(commit=True) as c:
            c.execute(
                "UPDATE ctxstore_idempotency SET status = ?, body = ?, created = ? "
                "WHERE tenant = ? AND key = ?",
                (status, body, time.time(), tenant, key),
            )

    def release(self, tenant: str, key: str) -> None:
        with self.datastore.transaction(commit=True) as c:
            c.execute(
                "DELETE FROM ctxstore_idempotency WHERE tenant = ? AND key = ? AND status IS NULL",
                (tenant, key),
            )


class PostgresIdempotencyKeys(IdempotencyKeys):
    def __init__(self, datastore: PostgresDatastore, ttl: float, pending: float) -> None:
        super().__init__(ttl, pending)
        self.datastore = datastore
        self.table = SQL("{0}.ctxstore_idempotency").format(Identifier(datastore.schema))
        with datastore.transaction(commit=True) as c:
            c.execute(
                SQL(
                    "CREATE TABLE IF NOT EXISTS {0} (tenant text NOT NULL, key text NOT NULL, "
                    "fingerprint text NOT NULL, status integer, body bytea, "
                    "created double precision NOT NULL, PRIMARY KEY (tenant, key))"
                ).format(self.table)
            )

    def claim(self, tenant: str, key: str, fingerprint: str) -> Claimed | None:
        done_before, pending_before = self._expired_before()
        with self.datastore.transaction(commit=True) as c:
            # No flush of its own: the write that follows flushes the log past it, and a
            # claim lost with a crash before that write left nothing to repeat.
            c.execute("SET LOCAL synchronous_commit TO OFF")
            c.execute(
                SQL(
                    "DELETE FROM {0} WHERE tenant = %s AND key = %s AND "
                    "((status IS NOT NULL AND created < %s) OR (status IS NULL AND created < %s))"
                ).format(self.table),
                (tenant, key, done_before, pending_before),
            )
            c.execute(
                SQL(
                    "INSERT INTO {0} (tenant, key, fingerprint, created) VALUES (%s, %s, %s, %s) "
                    "ON CONFLICT DO NOTHING"
                ).format(self.table),
                (tenant, key, fingerprint, time.time()),
            )
            if c.rowcount == 1:
                return None
            c.execute(
                SQL("SELECT fingerprint, status, body FROM {0} WHERE tenant = %s AND key = %s")
                .format(self.table),
                (tenant, key),
            )  # fmt: skip
            row: Any = c.fetchone()
        body = row["body"]
        return Claimed(row["fingerprint"], row["status"], None if body is None else bytes(body))

    def complete(self, tenant: str, key: str, status: int, body: bytes) -> None:
        with self.datastore.transaction(commit=True) as c:
            c.execute(
                SQL(
                    "UPDATE {0} SET status = %s, body = %s, created = %s "
                    "WHERE tenant = %s AND key = %s"
                ).format(self.table),
                (status, body, time.time(), tenant, key),
            )

    def release(self, tenant: str, key: str) -> None:
        with self.datastore.transaction(commit=True) as c:
            c.execute(
                SQL("DELETE FROM {0} WHERE tenant = %s AND key = %s AND status IS NULL").format(
                    self.table
                ),
                (tenant, key),
            )


class MemoryIdempotencyKeys(IdempotencyKeys):
    """For a memory:// store: keys live as long as the process."""

    def __init__(self, ttl: float, pending: float) -> None:
        super().__init__(ttl, pending)
        self._rows: dict[tuple[str, str], tuple[Claimed, float]] = {}
        self._lock = threading.Lock()

    def claim(self, tenant: str, key: str, fingerprint: str) -> Claimed | None:
        done_before, pending_before = self._expired_before()
        with self._lock:
            found = self._rows.get((tenant, key))
            if found is not None:
                held, created = found
                if created >= (pending_before if held.status is None else done_before):
                    return held
            self._rows[tenant, key] = (Claimed(fingerprint, None, None), time.time())
            return None

    def complete(self, tenant: str, key: str, status: int, body: bytes) -> None:
        with self._lock:
            held = self._rows[tenant, key][0]
            self._rows[tenant, key] = (Claimed(held.fingerprint, status, body), time.time())

    def release(self, tenant: str, key: str) -> None:
        with self._lock:
            found = self._rows.get((tenant, key))
            if found is not None and found[0].status is None:
                del self._rows[tenant, key]


def idempotency_keys(recorder: Any, ttl: float, pending: float) -> IdempotencyKeys:
    """The key table beside a store's events, created if missing."""
    datastore = getattr(recorder, "datastore", None)
    if isinstance(datastore, PostgresDatastore):
        return PostgresIdempotencyKeys(datastore, ttl, pending)
    if isinstance(datastore, SQLiteDatastore):
        return SQLiteIdempotencyKeys(datastore, ttl, pending)
    return MemoryIdempotencyKeys(ttl, pending)
