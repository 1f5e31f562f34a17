"""The library's SQLite events recorder, with a shorter way into a write transaction.

`SQLiteDatastore.transaction` reaches the library's own transaction through three
generator context managers (the datastore's, its pool checkout, the connection's). Around
a one-row append that machinery costs more CPU than the insert statement itself, and CPU
spent between two commits is what the next commit's wait makes slow. Here an insert takes
the same writer connection from the same pool and runs in the same `SQLiteTransaction`
(BEGIN, commit or rollback, sqlite3 errors mapped to the library's), without the layers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eventsourcing.persistence import StoredEvent
from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteTransaction


class SQLiteEventsRecorder(SQLiteApplicationRecorder):
    """The library's application recorder; `insert_events` as it is, one layer deep."""

    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        pool = self.datastore.pool
        conn = pool.get_connection(is_writer=True)  # the pool's writer interlock, as before
        try:
            with SQLiteTransaction(conn, commit=True) as curs, curs:
                return self._insert_events(curs, stored_events, **kwargs)
        finally:
            pool.put_connection(conn)


__all__ = ["SQLiteEventsRecorder"]
