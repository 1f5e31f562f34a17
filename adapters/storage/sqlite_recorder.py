"""SQLite's events write path: the library's application recorder, with a shorter way into
a write transaction, refusing an append to a context whose newest version is gone.

`SQLiteDatastore.transaction` reaches the library's own transaction through three generator
context managers; around a one-row append that machinery costs more CPU than the insert
itself, so an insert takes the same writer connection from the same pool and runs in the
same `SQLiteTransaction` without the layers.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from typing import Any
from uuid import UUID

from eventsourcing.persistence import IntegrityError, StoredEvent
from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteTransaction

from ctxstore.adapters.storage.group_commit import GroupCommit
from ctxstore.adapters.storage.turns import GONE

EVENT_IDS = "ctxstore_event_ids"  # the newest event id before events were deleted (sqlite.py)
ERASURES_OF = "SELECT count(*) FROM ctxstore_erasures WHERE context_id = ?"
ERASURES_INDEX = (
    "CREATE INDEX IF NOT EXISTS ctxstore_erasures_by_context ON ctxstore_erasures (context_id)"
)


class SQLiteEventsRecorder(SQLiteApplicationRecorder):
    """The library's application recorder; `insert_events` one layer deep, each event's id
    (rowid) above every id given out before, deleted or not."""

    @cached_property
    def insert_rising_statement(self) -> str:
        table = self.events_table_name
        return (
            f"INSERT INTO {table} (rowid, originator_id, originator_version, topic, state) "
            f"VALUES (max(COALESCE((SELECT MAX(rowid) FROM {table}), 0), "
            f"COALESCE((SELECT newest FROM {EVENT_IDS}), 0)) + 1, ?, ?, ?, ?)"
        )

    @cached_property
    def group(self) -> GroupCommit:
        return GroupCommit(self.datastore.pool, self._insert_events)

    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        """Stored with the appends other threads make meanwhile (group_commit.py), each
        succeeding or failing alone. `erasures`: see _insert_events."""
        return self.group.append(stored_events, kwargs.get("erasures"))

    def erasures_of(self, cid: UUID) -> int:
        """How many times the context was erased (storage/backend.erasures_of)."""
        with self.datastore.transaction(commit=False) as c:
            c.execute(ERASURES_OF, (cid.hex,))
            return int(c.fetchone()[0])

    def select_after(self, cid: UUID, gt: int) -> tuple[list[StoredEvent], int]:
        """The context's events after version `gt`, and how many times it was erased, read
        in one statement (a cached state's catch-up). UNION ALL, not a join: its ORDER BY
        would sort through a temporary b-tree, a third of the read's time."""
        with self.datastore.transaction(commit=False) as c:
            c.execute(
                f"SELECT NULL, NULL, NULL, ({ERASURES_OF}) UNION ALL "
                f"SELECT originator_version, topic, state, NULL FROM {self.events_table_name} "
                "WHERE originator_id = ? AND originator_version > ?",
                (cid.hex, cid.hex, gt),
            )
            rows = c.fetchall()
        events = sorted(
            (StoredEvent(cid, r[0], r[1], r[2]) for r in rows if r[0] is not None),
            key=lambda e: e.originator_version,
        )
        return events, next(int(r[3]) for r in rows if r[0] is None)

    def insert_events_with(
        self, conn: Any, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        """Insert on a writer connection already taken (the async store's, which takes it
        without waiting); `erasures` as for _insert_events."""
        with SQLiteTransaction(conn, commit=True) as curs, curs:
            return self._insert_events(curs, stored_events, **kwargs)

    def _insert_events(
        self, c: Any, stored_events: Sequence[StoredEvent], erasures: int | None = None,
        **kwargs: Any,
    ) -> Sequence[int] | None:  # fmt: skip
        """The library's insert, one statement an event; the first (past a creation) stays
        only if the version before it is there (an erasure left none) and, when the writer
        says how many times the context had been erased when it read its state
        (`erasures`), the count is still that (an erasure, then the context made again
        under its id, leaves the version in place). Asked after the insert, which holds the
        file's write lock: no erasure comes in between."""
        returning = []
        for n, s in enumerate(stored_events):
            cid = s.originator_id.hex if isinstance(s.originator_id, UUID) else s.originator_id
            row = (cid, s.originator_version, s.topic, s.state)
            c.execute(self.insert_rising_statement, row)
            if n == 0 and s.originator_version > 1:
                c.execute(
                    f"SELECT (SELECT 1 FROM {self.events_table_name} "
                    "WHERE originator_id = ? AND originator_version = ?), "
                    f"({ERASURES_OF})",
                    (cid, s.originator_version - 1, cid),
                )
                before, erased = c.fetchone()
                if before is None or (erasures is not None and erased != erasures):
                    raise IntegrityError(GONE)
            returning.append(c.lastrowid)
        return returning


__all__ = ["ERASURES_INDEX", "SQLiteEventsRecorder"]
