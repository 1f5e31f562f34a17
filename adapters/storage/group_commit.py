"""Group commit on SQLite: appends from several threads of one process share a transaction.

SQLite takes one writer at a time, and each commit waits for the disk. When threads append
to different contexts at once, the one that gets the writer connection (the leader) stores
every append queued meanwhile in one transaction and commits once, so the disk's wait is
paid once for all of them. Each append runs inside a savepoint of its own: one that fails
(another writer took its version, its context was erased) is rolled back alone and reported
to its caller alone, the others commit. When the commit itself fails, nothing of the group
is stored and every caller hears the failure, as it would of its own transaction; a caller
whose reply is lost asks the store by its command id as before (adapters/store/writer.py).

A lone writer finds the queue empty but for its own append: one transaction, as before,
without a savepoint (two statements fewer).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable, Sequence
from typing import Any

from eventsourcing.persistence import (
    IntegrityError,
    OperationalError,
    PersistenceError,
    StoredEvent,
)
from eventsourcing.sqlite import SQLiteTransaction

MAX_GROUP = 64  # appends stored in one transaction at most

Insert = Callable[[Any, Sequence[StoredEvent], int | None], Sequence[int] | None]


class _Append:
    __slots__ = ("done", "erasures", "error", "events", "ids")

    def __init__(self, events: Sequence[StoredEvent], erasures: int | None) -> None:
        self.events = events
        self.erasures = erasures  # what the writer's state was read under (the recorder)
        self.ids: Sequence[int] | None = None
        self.error: BaseException | None = None
        self.done = False


def _open(conn: Any) -> bool:
    """Whether the connection's transaction is still open (some failures end it)."""
    return bool(conn._sqlite_conn.in_transaction)


def typed(exc: sqlite3.Error) -> PersistenceError:
    """The library's error for a driver's (what its transaction raises)."""
    if isinstance(exc, sqlite3.IntegrityError):
        return IntegrityError(exc)
    if isinstance(exc, sqlite3.OperationalError):
        return OperationalError(exc)
    return PersistenceError(exc)


class GroupCommit:
    """The appends of one recorder, queued and stored by whichever caller leads."""

    def __init__(self, pool: Any, insert: Insert) -> None:
        self.pool, self.insert = pool, insert
        self._queue: list[_Append] = []
        self._queued = threading.Lock()
        self._leading = threading.Lock()
        self.commits = self.appends = 0  # transactions led, appends they held

    def append(
        self, events: Sequence[StoredEvent], erasures: int | None = None
    ) -> Sequence[int] | None:
        mine = _Append(events, erasures)
        with self._queued:
            self._queue.append(mine)
        while True:
            with self._leading:
                if not mine.done:
                    self._lead()
            if mine.done:
                break
        if mine.error is not None:
            raise mine.error
        return mine.ids

    def _lead(self) -> None:
        with self._queued:
            group, self._queue = self._queue[:MAX_GROUP], self._queue[MAX_GROUP:]
        if not group:
            return
        self.commits += 1
        self.appends += len(group)
        try:
            conn = self.pool.get_connection(is_writer=True)
            try:
                with SQLiteTransaction(conn, commit=True) as curs, curs:
                    if len(group) == 1:  # alone: its transaction is its savepoint
                        group[0].ids = self.insert(curs, group[0].events, group[0].erasures)
                    else:
                        for a in group:
                            self._one(conn, curs, a)
                            if a.error is not None and not _open(conn):
                                raise a.error  # the statement's failure ended the transaction
            except BaseException:
                if _open(conn):  # a failed COMMIT may leave it open
                    with contextlib.suppress(sqlite3.Error):
                        conn.rollback()
                raise
            finally:
                self.pool.put_connection(conn)
        except BaseException as exc:
            # Nothing of the group is stored: each caller hears why (a stored-looking id
            # from before the failure means nothing now).
            for a in group:
                if a.error is None:
                    a.ids, a.error = None, exc
            if not isinstance(exc, Exception):
                raise
        finally:
            for a in group:
                a.done = True

    def _one(self, conn: Any, curs: Any, a: _Append) -> None:
        curs.execute("SAVEPOINT ctxstore_append")
        try:
            a.ids = self.insert(curs, a.events, a.erasures)
        except (sqlite3.Error, PersistenceError) as exc:
            a.error = typed(exc) if isinstance(exc, sqlite3.Error) else exc
            if _open(conn):
                curs.execute("ROLLBACK TO ctxstore_append")
        if _open(conn):
            curs.execute("RELEASE ctxstore_append")
