"""PostgreSQL's blob rows: the shared SQL (storage/blobs.py) in the store's schema, each
blob's work serialised by a transaction-scoped advisory lock."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

from eventsourcing.postgres import PostgresDatastore
from psycopg.sql import SQL, Identifier

from ctxstore.adapters.storage.blobs import BLOBS, REFS, SQLBlobRows


class PostgresBlobRows(SQLBlobRows):
    def __init__(self, datastore: PostgresDatastore) -> None:
        schema = Identifier(datastore.schema)
        blobs, refs = (
            SQL("{0}.{1}").format(schema, Identifier(t)).as_string() for t in (BLOBS, REFS)
        )
        super().__init__(blobs, refs, "%s")
        self.datastore = datastore

    def _transaction(self) -> AbstractContextManager[Any]:
        return self.datastore.transaction(commit=True)

    def _lock(self, c: Any, tenant: str, sha256: str) -> None:
        c.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"{tenant}/{sha256}",))
