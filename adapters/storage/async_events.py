"""A store's events appended and read without blocking an event loop (the async store).

- PostgreSQL: psycopg's async connections (a pool of its own, as the sync one is bounded),
  calling the same insert function the sync recorder calls — turn check and
  notification alike — and reading a context's newer events.
- SQLite: each insert on a worker thread that never waits for another writer: the
  database's write lock is tried without a busy timeout and, while another connection
  holds it, awaited on the loop by sleeping; readers never wait in WAL mode. The commit
  runs off the loop because its I/O is not always short: a commit that crosses the WAL's
  checkpoint size copies pages into the database file (10-20 ms on the loop, measured).
  A cancelled insert is awaited to its end before the cancellation goes on, so no write
  is left half-applied and no lock held.
- memory://: in process, nothing to wait for.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import (
    ConnectionUnavailableError,
    IntegrityError,
    OperationalError,
    PersistenceError,
    StoredEvent,
)

from ctxstore.adapters.threads.settled import settled

BUSY_WAIT = (0.0002, 0.02)  # the first and the longest sleep while another writer writes


def after_rows(cid: UUID, rows: Sequence[Sequence[Any]]) -> tuple[list[StoredEvent], int]:
    """(version, topic, state, erasures) rows as events and the erasure count."""
    events = [StoredEvent(cid, r[0], r[1], bytes(r[2])) for r in rows if r[0] is not None]
    return events, int(rows[0][3]) if rows else 0


class AsyncEvents:
    """memory://: the recorder itself (no I/O to wait for)."""

    def __init__(self, storage: Any) -> None:
        self.storage = storage

    async def insert(
        self, cid: UUID, stored: Sequence[StoredEvent], erasures: int | None = None
    ) -> None:
        """Store a context's sealed events; raises the library's IntegrityError when one
        of their versions is taken (or another writer holds the context's turn, or the
        context's erasures are no longer `erasures`: storage/backend.erasures_of)."""
        with self.storage.turns.racing(cid):
            self.storage.recorder.insert_events(stored, erasures=erasures)

    async def select(self, cid: UUID, after: int) -> list[StoredEvent]:
        """The context's stored events after a version, in order."""
        return list(self.storage.recorder.select_events(cid, gt=after))

    async def select_after(self, cid: UUID, after: int) -> tuple[list[StoredEvent], int]:
        """select, and how many times the context was erased, read together."""
        stored, erasures = self.storage.backend.events_after(self.storage.recorder, cid, after)
        return list(stored), erasures

    async def close(self) -> None:
        self.discard()

    def discard(self) -> None:
        """Release what this holds, without awaiting (the store is closing)."""


class SQLiteAsyncEvents(AsyncEvents):
    """SQLite: the write lock tried without waiting; awaited while another writer holds it."""

    def __init__(self, storage: Any, busy_timeout_ms: int) -> None:
        super().__init__(storage)
        self.busy_timeout_ms = busy_timeout_ms

    async def insert(
        self, cid: UUID, stored: Sequence[StoredEvent], erasures: int | None = None
    ) -> None:
        delay, most = BUSY_WAIT
        while True:
            if await settled(self._try_insert, cid, stored, erasures):
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, most)

    def _try_insert(self, cid: UUID, stored: Sequence[StoredEvent], erasures: int | None) -> bool:
        """Insert unless that would wait for another writer (False)."""
        recorder = self.storage.recorder
        pool = recorder.datastore.pool
        try:
            conn = pool.get_connection(timeout=0, is_writer=True)
        except ConnectionUnavailableError:
            return False  # this process's other writer holds it
        raw: sqlite3.Connection = conn._sqlite_conn
        try:
            raw.execute("PRAGMA busy_timeout = 0")
            try:
                with self.storage.turns.racing(cid):
                    recorder.insert_events_with(conn, stored, erasures=erasures)
            except OperationalError as exc:
                if "locked" in str(exc) or "busy" in str(exc):
                    return False  # another process writes: try again after a sleep
                raise
            return True
        finally:
            raw.execute(f"PRAGMA busy_timeout = {self.busy_timeout_ms}")
            pool.put_connection(conn)


class PostgresAsyncEvents(AsyncEvents):
    """PostgreSQL: the sync recorder's insert function and reads, on async connections.

    Its own small pool: idle connections kept for reuse, at most `size` in use at once per
    event loop (no background tasks, so a store used from several loops in turn, or
    dropped without closing, leaves nothing running)."""

    def __init__(self, storage: Any, conninfo: str, size: int, statement_timeout: float):
        super().__init__(storage)
        self.recorder = storage.recorder
        self.conninfo, self.size = conninfo, size
        self.options = f"-c statement_timeout={int(statement_timeout * 1000)}"
        self._idle: list[Any] = []
        self._slots: tuple[asyncio.AbstractEventLoop, asyncio.Semaphore] | None = None
        self._insert = self.recorder.sql_insert_rows
        self._select = self.recorder.sql_select_after()
        self._select_after = self.recorder.sql_select_after_with_erasures()

    def _semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if self._slots is None or self._slots[0] is not loop:
            self._slots = (loop, asyncio.Semaphore(self.size))
        return self._slots[1]

    async def _run(self, statement: Any, params: Sequence[Any]) -> list[Any]:
        import psycopg

        async with self._semaphore():
            conn = self._idle.pop() if self._idle else None
            try:
                if conn is None:
                    conn = await psycopg.AsyncConnection.connect(
                        self.conninfo, autocommit=True, options=self.options
                    )
                cursor = await conn.execute(statement, params)
                rows = await cursor.fetchall()
            except psycopg.IntegrityError as exc:
                self._done(conn)
                raise IntegrityError(str(exc)) from exc
            except psycopg.Error as exc:
                self._done(conn)
                raise PersistenceError(str(exc)) from exc
            except BaseException:
                self._discard(conn)  # cancelled mid-statement: its state is unknown
                raise
            self._done(conn)
            return rows

    def _done(self, conn: Any) -> None:
        import psycopg

        if conn is None:
            return
        if conn.closed or conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            self._discard(conn)
        elif len(self._idle) < self.size:
            self._idle.append(conn)
        else:
            self._discard(conn)

    @staticmethod
    def _discard(conn: Any) -> None:
        if conn is not None and not conn.closed:
            conn.pgconn.finish()  # closes the socket without awaiting

    async def insert(
        self, cid: UUID, stored: Sequence[StoredEvent], erasures: int | None = None
    ) -> None:
        checked = erasures is not None
        rows = await self._run(
            self._insert(len(stored), checked), self.recorder.rows_of(stored, erasures)
        )
        self.recorder.rows_stored(rows, erasures)

    async def select(self, cid: UUID, after: int) -> list[StoredEvent]:
        rows = await self._run(self._select, (cid, after))
        return [StoredEvent(cid, r[0], r[1], bytes(r[2])) for r in rows]

    async def select_after(self, cid: UUID, after: int) -> tuple[list[StoredEvent], int]:
        rows = await self._run(self._select_after, (cid.hex, cid, after))
        return after_rows(cid, rows)

    async def close(self) -> None:
        self.discard()

    def discard(self) -> None:
        """Close the idle connections now (no await needed)."""
        while self._idle:
            self._discard(self._idle.pop())
