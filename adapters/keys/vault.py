"""The vault: every data key, wrapped by a KEK, by name and generation.

A name is a context id's 32 hex digits, or `store:<purpose>` for the store's own keys (the
audit index's hashing key, attachments, responses not tied to a context). A context's key
may have several generations while it is re-keyed; stored states name the generation they
were sealed with. Destroying a name's rows is what erasure does: once they are gone from
every copy of the vault, nothing sealed under them can be opened again.

Where the vault lives decides what erasure guarantees (docs/explanation/security.md): beside a SQLite
store it is its own file (`<store>.keys`), so the store's file, its WAL and its backups hold
ciphertext only; on PostgreSQL it is by default a table in the store's database, whose WAL,
replicas and backups keep a destroyed key (wrapped) until the KEK that wrapped it is
rotated out; CTXSTORE_KEY_VAULT puts it elsewhere (another server, a file).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from ctxstore.adapters.storage.sqlite_pool import read_only_uri
from ctxstore.adapters.storage.urls import read_only_reason

WrappedRow = tuple[str, int, str, bytes]  # name, generation, kek id, wrapped key
TABLE = "ctxstore_keys"
DDL = (
    "CREATE TABLE IF NOT EXISTS {table} (name TEXT NOT NULL, generation INTEGER NOT NULL, "
    "kek_id TEXT NOT NULL, wrapped {blob} NOT NULL, created DOUBLE PRECISION NOT NULL, "
    "PRIMARY KEY (name, generation))"
)


class KeyVault(ABC):
    """Wrapped data keys; every method is one short transaction."""

    where: str = "memory"  # what erasure records name as the vault's place
    apart: bool = True  # kept outside the events database (its WAL and backups)

    @abstractmethod
    def rows(self, name: str) -> list[WrappedRow]:
        """A name's wrapped keys, oldest generation first."""

    @abstractmethod
    def add(self, row: WrappedRow) -> bool:
        """Store a wrapped key unless the name already has that generation; whether it did."""

    @abstractmethod
    def destroy(self, names: Sequence[str]) -> int:
        """Delete every generation of the names for good; the rows deleted."""

    @abstractmethod
    def drop_generations(self, name: str, below: int) -> int:
        """Delete a name's generations older than `below` (after re-keying)."""

    @abstractmethod
    def not_wrapped_by(self, kek: str, after: tuple[str, int], limit: int) -> list[WrappedRow]:
        """Up to `limit` rows wrapped by another KEK, after (name, generation) `after`, in
        that order."""

    @abstractmethod
    def rewrap(self, rows: Sequence[tuple[WrappedRow, WrappedRow]]) -> int:
        """Replace each (old, new) pair's wrapping in one transaction, each only if the row
        still holds the old one; the rows replaced."""

    @abstractmethod
    def kek_counts(self) -> dict[str, int]:
        """How many wrapped keys each KEK holds."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""


class MemoryVault(KeyVault):
    def __init__(self) -> None:
        self._rows: dict[tuple[str, int], WrappedRow] = {}
        self._lock = threading.Lock()

    def rows(self, name: str) -> list[WrappedRow]:
        with self._lock:
            return sorted((r for k, r in self._rows.items() if k[0] == name), key=lambda r: r[1])

    def add(self, row: WrappedRow) -> bool:
        with self._lock:
            return self._rows.setdefault((row[0], row[1]), row) is row

    def destroy(self, names: Sequence[str]) -> int:
        with self._lock:
            gone = [k for k in self._rows if k[0] in set(names)]
            for k in gone:
                del self._rows[k]
            return len(gone)

    def drop_generations(self, name: str, below: int) -> int:
        with self._lock:
            gone = [k for k in self._rows if k[0] == name and k[1] < below]
            for k in gone:
                del self._rows[k]
            return len(gone)

    def not_wrapped_by(self, kek: str, after: tuple[str, int], limit: int) -> list[WrappedRow]:
        with self._lock:
            found = sorted(r for r in self._rows.values() if r[2] != kek and r[:2] > after)
            return found[:limit]

    def rewrap(self, rows: Sequence[tuple[WrappedRow, WrappedRow]]) -> int:
        done = 0
        with self._lock:
            for old, new in rows:
                if self._rows.get((old[0], old[1])) == old:
                    self._rows[(old[0], old[1])] = new
                    done += 1
        return done

    def kek_counts(self) -> dict[str, int]:
        with self._lock:
            counts: dict[str, int] = {}
            for r in self._rows.values():
                counts[r[2]] = counts.get(r[2], 0) + 1
            return counts


def _row(r: Any) -> WrappedRow:
    values = tuple(r.values()) if isinstance(r, dict) else tuple(r)
    return (values[0], values[1], values[2], bytes(values[3]))


class SQLKeyVault(KeyVault, ABC):
    """A vault in one SQL table; subclasses say how to connect and the placeholder."""

    mark = "?"
    table = TABLE

    @abstractmethod
    def _connect(self, write: bool = True) -> AbstractContextManager[Any]:
        """A connection in a transaction that commits when the block ends."""

    def _sql(self, text: str) -> str:
        return text.format(t=self.table, m=self.mark)

    def rows(self, name: str) -> list[WrappedRow]:
        sql = "SELECT name, generation, kek_id, wrapped FROM {t} WHERE name = {m} ORDER BY 2"
        with self._connect(write=False) as c:
            return [_row(r) for r in c.execute(self._sql(sql), (name,)).fetchall()]

    def add(self, row: WrappedRow) -> bool:
        sql = (
            "INSERT INTO {t} (name, generation, kek_id, wrapped, created) "
            "VALUES ({m}, {m}, {m}, {m}, {m}) ON CONFLICT DO NOTHING"
        )
        with self._connect() as c:
            return bool(c.execute(self._sql(sql), (*row, time.time())).rowcount)

    def destroy(self, names: Sequence[str]) -> int:
        with self._connect() as c:
            sql = self._sql("DELETE FROM {t} WHERE name = {m}")
            return sum(c.execute(sql, (n,)).rowcount for n in names)

    def drop_generations(self, name: str, below: int) -> int:
        sql = "DELETE FROM {t} WHERE name = {m} AND generation < {m}"
        with self._connect() as c:
            return int(c.execute(self._sql(sql), (name, below)).rowcount)

    def not_wrapped_by(self, kek: str, after: tuple[str, int], limit: int) -> list[WrappedRow]:
        sql = (
            "SELECT name, generation, kek_id, wrapped FROM {t} WHERE kek_id <> {m} "
            "AND (name > {m} OR (name = {m} AND generation > {m})) "
            "ORDER BY name, generation LIMIT {m}"
        )
        params = (kek, after[0], after[0], after[1], limit)
        with self._connect() as c:
            return [_row(r) for r in c.execute(self._sql(sql), params).fetchall()]

    def rewrap(self, rows: Sequence[tuple[WrappedRow, WrappedRow]]) -> int:
        sql = self._sql(
            "UPDATE {t} SET kek_id = {m}, wrapped = {m} "
            "WHERE name = {m} AND generation = {m} AND kek_id = {m}"
        )
        params = [(new[2], new[3], old[0], old[1], old[2]) for old, new in rows]
        with self._connect() as c:
            cursor = c.cursor()
            cursor.executemany(sql, params)
            return int(cursor.rowcount)

    def kek_counts(self) -> dict[str, int]:
        with self._connect() as c:
            found = c.execute(self._sql("SELECT kek_id, count(*) FROM {t} GROUP BY 1")).fetchall()
        return {
            r[0]: r[1] for r in (tuple(x.values()) if isinstance(x, dict) else x for x in found)
        }


def ddl(table: str, blob: str = "bytea") -> str:
    return DDL.format(table=table, blob=blob)


class SQLiteVault(SQLKeyVault):
    """A vault in its own SQLite file. Deleted keys are overwritten in the file
    (secure_delete) and the WAL is truncated after each destruction, so the file holds no
    trace of them. Writes take a connection each; reads reuse one per thread (an idle
    connection holds no snapshot, so it never keeps old frames alive)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        self.where = f"the key file {path}"
        # A key file on read-only media (as its store) is read as it is: every key it
        # holds opens; a write is refused by SQLite.
        self.read_only = read_only_reason(path)
        if self.read_only:
            return
        with self._connect() as c:
            c.execute(ddl(TABLE, "BLOB"))
        conn = sqlite3.connect(self.path, timeout=10, isolation_level=None)
        try:  # kept in the file: every later connection uses it
            conn.execute("PRAGMA journal_mode = WAL")
        finally:
            conn.close()

    def _reader(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(
                read_only_uri(str(self.path)) if self.read_only else self.path,
                timeout=10, isolation_level=None, check_same_thread=False,
                uri=bool(self.read_only),
            )  # fmt: skip
            self._local.conn = conn
            with self._readers_lock:
                self._readers.append(conn)
        return conn

    @contextmanager
    def _connect(self, write: bool = True) -> Iterator[sqlite3.Connection]:
        if not write:
            reader = self._reader()
            reader.execute("BEGIN")
            try:
                yield reader
            finally:
                reader.execute("COMMIT")
            return
        conn = sqlite3.connect(self.path, timeout=10, isolation_level=None)
        try:
            if write:
                conn.execute("PRAGMA secure_delete = ON")
                conn.execute("PRAGMA synchronous = FULL")  # a lost key loses a context
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        finally:
            conn.close()

    def destroy(self, names: Sequence[str]) -> int:
        done = super().destroy(names)
        conn = sqlite3.connect(self.path, timeout=10, isolation_level=None)
        try:  # the WAL's frames held the rows: fold them into the (zeroed) file, then cut it
            for _ in range(50):
                busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
                if not busy:
                    break
                time.sleep(0.02)
        finally:
            conn.close()
        return done

    def close(self) -> None:
        with self._readers_lock:
            for conn in self._readers:
                conn.close()
            self._readers.clear()
        self._local = threading.local()


class PostgresVault(SQLKeyVault):
    """A vault in a PostgreSQL table: the store's own database (through its pool), or
    another server's (CTXSTORE_KEY_VAULT)."""

    mark = "%s"
    owned: Any = None  # a pool of its own (a vault on another server), closed with it

    def __init__(self, connect: Any, schema: str, where: str, *, apart: bool, create: bool) -> None:
        self._get_connection = connect  # () -> context manager of an autocommit connection
        self.table = f'"{schema}".{TABLE}'
        self.where = where
        self.apart = apart
        if create:  # in the store's database the table is a migration's (postgres_schema.py)
            with self._connect() as c:
                c.execute(ddl(self.table))

    @contextmanager
    def _connect(self, write: bool = True) -> Iterator[Any]:
        with self._get_connection() as conn, conn.transaction():
            yield conn

    def close(self) -> None:
        if self.owned is not None:
            self.owned.close()
