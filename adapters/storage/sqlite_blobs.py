"""SQLite's blob rows: the shared SQL (storage/blobs.py) on the file, with deleted blobs'
pages zeroed and the log checkpointed so their bytes leave it."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any
from uuid import UUID

from eventsourcing.sqlite import SQLiteDatastore

from ctxstore.adapters.storage.blobs import BLOBS, REFS, SQLBlobRows


class SQLiteBlobRows(SQLBlobRows):
    def __init__(self, datastore: SQLiteDatastore) -> None:
        super().__init__(BLOBS, REFS, "?")
        self.datastore = datastore

    def _transaction(self) -> AbstractContextManager[Any]:
        return self.datastore.transaction(commit=True)

    def _rowcount(self, c: Any) -> int:
        return max(int(c.sqlite_cursor.rowcount), 0)

    def _secure(self, c: Any) -> None:
        c.execute("PRAGMA secure_delete = ON")  # a deleted blob's pages are zeroed

    def release(self, cid: UUID) -> int:
        deleted = super().release(cid)
        if deleted:  # the zeroed pages reach the file, and the log lets go of the old ones
            with self.datastore.transaction(commit=False) as c:
                c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return deleted
