"""The raw driver floor: plain INSERTs through sqlite3 and psycopg, nothing else.

Each floor writes into a table shaped as the library's events table, in a file or table of
its own, one transaction per group of rows: a group is what one ctxstore command commits
(one row for an append; a compaction's batch_start and compress together).
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

import psycopg


class RawSQLite:
    """Plain transactions through sqlite3 (WAL, as the store), in a file of their own."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute(
            "CREATE TABLE raw (originator_id TEXT, originator_version INTEGER, topic TEXT,"
            " state BLOB, PRIMARY KEY (originator_id, originator_version))"
        )
        self.oid, self.version = uuid.uuid4().hex, 0

    def write(self, groups: Sequence[Sequence[bytes]]) -> float:
        """Seconds to write each group of rows in a transaction of its own."""
        t = time.perf_counter()
        for rows in groups:
            self.conn.execute("BEGIN")
            for state in rows:
                self.version += 1
                self.conn.execute(
                    "INSERT INTO raw VALUES (?,?,?,?)", (self.oid, self.version, "t", state)
                )
            self.conn.execute("COMMIT")
        return time.perf_counter() - t

    def close(self) -> None:
        self.conn.close()


class RawPostgres:
    """Plain transactions through psycopg, in a table of their own (dropped on close)."""

    def __init__(self, dsn: str) -> None:
        self.table = f"raw_{uuid.uuid4().hex[:8]}"
        self.conn = psycopg.connect(dsn)
        self.conn.execute(
            f"CREATE TABLE {self.table} (originator_id uuid, originator_version int, "
            "topic text, state bytea, PRIMARY KEY (originator_id, originator_version))"
        )
        self.conn.commit()
        self.oid, self.version = uuid.uuid4(), 0

    def write(self, groups: Sequence[Sequence[bytes]]) -> float:
        t = time.perf_counter()
        for rows in groups:
            for state in rows:
                self.version += 1
                self.conn.execute(
                    f"INSERT INTO {self.table} VALUES (%s,%s,%s,%s)",
                    (self.oid, self.version, "t", state),
                )
            self.conn.commit()
        return time.perf_counter() - t

    def close(self) -> None:
        self.conn.execute(f"DROP TABLE {self.table}")
        self.conn.commit()
        self.conn.close()


Floor = RawSQLite | RawPostgres
