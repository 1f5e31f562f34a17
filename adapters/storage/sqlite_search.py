"""SQLite's search index: the rows in `ctxstore_search`, their words in a contentless FTS5
table (`ctxstore_search_fts`, ranked by bm25), beside the events in the store's file.

The FTS table holds words, not text: a row's words are written from its text
(domain/search/text.py) and deleted the same way, so the text itself is kept once. FTS5
keeps a deleted row's words in its segments until they merge: erasure merges them
('optimize') in its transaction, with `secure_delete` zeroing the pages it frees. Each
merge deepens the table's structure (keep_words_sound keeps it within FTS5's bound).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eventsourcing.sqlite import SQLiteDatastore

from ctxstore.adapters.storage.search_index import (
    HEADS,
    PENDING,
    POSITION,
    TABLE,
    After,
    Found,
    Read,
    SearchFilter,
    SearchIndex,
    SearchRow,
    sql_filter,
)
from ctxstore.domain.search.query import Query
from ctxstore.domain.search.text import words

FTS = "ctxstore_search_fts"
COLUMNS = "id, context_id, message_id, version, role, ts, tenant, body, digest, visible"
DDL = (
    (
        f"CREATE TABLE IF NOT EXISTS {TABLE} (id INTEGER PRIMARY KEY, context_id TEXT NOT NULL, "
        "message_id TEXT NOT NULL, version INTEGER NOT NULL, role TEXT NOT NULL, "
        "ts INTEGER NOT NULL, tenant TEXT, name TEXT, body TEXT NOT NULL, digest TEXT NOT NULL, "
        "visible INTEGER NOT NULL DEFAULT 0, UNIQUE (context_id, version, message_id))"
    ),
    f"CREATE INDEX IF NOT EXISTS {TABLE}_message_idx ON {TABLE} (context_id, message_id)",
    # Words only (content=''), split by the index's own rules (letters and digits, CJK as
    # pairs), so the tokenizer only splits on the spaces put between them.
    (
        f"CREATE VIRTUAL TABLE IF NOT EXISTS {FTS} USING fts5(terms, content='', "
        "tokenize='unicode61 remove_diacritics 0')"
    ),
    f"CREATE TABLE IF NOT EXISTS {HEADS} (context_id TEXT PRIMARY KEY, version INTEGER NOT NULL)",
    f"CREATE TABLE IF NOT EXISTS {PENDING} (context_id TEXT PRIMARY KEY)",
    (
        f"CREATE TABLE IF NOT EXISTS {POSITION} (one INTEGER PRIMARY KEY CHECK (one = 1), "
        "position INTEGER NOT NULL)"
    ),
)


def terms(text: str) -> str:
    return " ".join(words(text))


def erase_rows(c: Any, context_hex: str) -> int:
    """Delete a context's rows and their words (in the caller's transaction); how many."""
    keep_words_sound(c)  # (an unreadable FTS table would refuse the erasure)
    c.execute(f"SELECT id, body FROM {TABLE} WHERE context_id = ?", (context_hex,))
    found = c.fetchall()
    _drop(c, found)
    c.execute(f"DELETE FROM {HEADS} WHERE context_id = ?", (context_hex,))
    c.execute(f"DELETE FROM {PENDING} WHERE context_id = ?", (context_hex,))
    return len(found)


def _drop(c: Any, found: Sequence[Any]) -> None:
    """Delete rows, (id, body) each, and their words (written as the rows wrote them)."""
    for row_id, body in found:
        c.execute(
            f"INSERT INTO {FTS} ({FTS}, rowid, terms) VALUES ('delete', ?, ?)",
            (row_id, terms(body)),
        )
        c.execute(f"DELETE FROM {TABLE} WHERE id = ?", (row_id,))


def purge_words(c: Any) -> None:
    """Merge the FTS segments, so words of deleted rows leave the file (after an erasure)."""
    c.execute(f"INSERT INTO {FTS} ({FTS}) VALUES ('optimize')")
    keep_words_sound(c)


# FTS5 before SQLite 3.45 puts each 'optimize' that merges anything one level deeper, and
# reads a structure of about 2,000 levels as corrupt ("database disk image is malformed",
# then "vtable constructor failed"): even erasure, which deletes words, is then refused.
# Past this many levels the words are written anew from the rows (one level again).
LEVELS = 32
MAX_LEVELS = 64  # FTS5's own bound: past it the structure is already unreadable
EMPTY = ((1, b""), (10, bytes(7)))  # a new FTS5 table's records: averages, structure


def levels(c: Any) -> int:
    """How many levels the FTS table's structure record declares (after its 4-byte cookie,
    a varint)."""
    c.execute(f"SELECT block FROM {FTS}_data WHERE id = 10")
    found = c.fetchone()
    block = bytes(found[0]) if found else b""
    count = 0
    for i, byte in enumerate(block[4:13]):
        if i == 8:
            return (count << 8) | byte
        count = (count << 7) | (byte & 0x7F)
        if not byte & 0x80:
            return count
    return count


def keep_words_sound(c: Any) -> bool:
    """Write the words anew from the rows (in the caller's transaction) when the FTS table's
    structure is deeper than LEVELS, or unreadable already; whether it did."""
    deep = levels(c)
    if deep <= LEVELS:
        return False
    if deep > MAX_LEVELS:  # unreadable: FTS5 cannot even open it, so its own records go
        for table in ("data", "idx", "docsize"):
            c.execute(f"DELETE FROM {FTS}_{table}")
        c.executemany(f"INSERT INTO {FTS}_data (id, block) VALUES (?, ?)", EMPTY)
    else:
        c.execute(f"INSERT INTO {FTS} ({FTS}) VALUES ('delete-all')")
    c.execute(f"SELECT id, body FROM {TABLE}")
    rows = c.fetchall()
    c.executemany(
        f"INSERT INTO {FTS} (rowid, terms) VALUES (?, ?)", [(i, terms(b)) for i, b in rows]
    )
    return True


def erase_history_rows(c: Any, context_hex: str, through: int) -> None:
    """A history bound removed versions 2..through: their rows go, and the context is
    indexed anew from what it kept (its head forgotten: the next catch-up indexes the
    checkpoint's visible messages)."""
    keep_words_sound(c)
    c.execute(
        f"SELECT id, body FROM {TABLE} WHERE context_id = ? AND version > 1 AND version <= ?",
        (context_hex, through),
    )
    found = c.fetchall()
    _drop(c, found)
    c.execute(f"DELETE FROM {HEADS} WHERE context_id = ?", (context_hex,))
    c.execute(
        f"INSERT INTO {PENDING} (context_id) VALUES (?) ON CONFLICT DO NOTHING", (context_hex,)
    )
    if found:
        purge_words(c)


class SQLiteSearchIndex(SearchIndex):
    """The search index in the store's SQLite file."""

    def __init__(self, datastore: SQLiteDatastore, events_table: str) -> None:
        self.datastore = datastore
        self.events_table = events_table

    def create_table(self) -> None:
        with self.datastore.transaction(commit=True) as c:
            for statement in DDL:
                c.execute(statement)

    def position(self) -> int:
        with self.datastore.transaction(commit=False) as c:
            c.execute(f"SELECT position FROM {POSITION}")
            found = c.fetchone()
            return int(found[0]) if found else 0

    def advance(self, position: int) -> None:
        with self.datastore.transaction(commit=True) as c:
            c.execute(
                f"INSERT INTO {POSITION} (one, position) VALUES (1, ?) ON CONFLICT (one) "
                "DO UPDATE SET position = max(position, excluded.position)",
                (position,),
            )

    def pending(self) -> list[str]:
        with self.datastore.transaction(commit=False) as c:
            c.execute(f"SELECT context_id FROM {PENDING}")
            return [str(r[0]) for r in c.fetchall()]

    def advance_to(self, position: int) -> None:
        with self.datastore.transaction(commit=True) as c:
            c.execute(f"DELETE FROM {POSITION}")
            c.execute(f"INSERT INTO {POSITION} (one, position) VALUES (1, ?)", (position,))
        self.seen_newest = None

    def head(self, context_hex: str) -> int:
        with self.datastore.transaction(commit=False) as c:
            c.execute(f"SELECT version FROM {HEADS} WHERE context_id = ?", (context_hex,))
            found = c.fetchone()
            return int(found[0]) if found else 0

    def newest_event(self) -> int:
        with self.datastore.transaction(commit=False) as c:
            c.execute(f"SELECT max(rowid) FROM {self.events_table}")
            found = c.fetchone()
            return int(found[0] or 0)

    def store(
        self, context_hex: str, rows: Sequence[SearchRow], visible: dict[str, str], head: int,
        only: set[str] | None = None, read: Read | None = None,
    ) -> bool:  # fmt: skip
        with self.datastore.transaction(commit=True) as c:
            # A write first: the file's write lock, so no erasure or history bound commits
            # between the checks below and the rows (a read first would be refused the lock
            # later, "busy", when one did).
            c.execute(f"DELETE FROM {PENDING} WHERE 0")
            c.execute(
                f"SELECT 1 FROM {self.events_table} WHERE originator_id = ? LIMIT 1", (context_hex,)
            )
            if c.fetchone() is None:  # erased since its events were read
                erase_rows(c, context_hex)
                return True
            if read is not None and not self._unchanged(c, context_hex, head, read):
                return False
            keep_words_sound(c)
            for r in rows:
                c.execute(
                    f"INSERT INTO {TABLE} (context_id, message_id, version, role, ts, tenant, "
                    "name, body, digest) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    (
                        r.context_hex,
                        r.message_id,
                        r.version,
                        r.role,
                        r.at,
                        r.tenant,
                        r.name,
                        r.text,
                        r.digest,
                    ),
                )
                if c.sqlite_cursor.rowcount == 1:
                    c.execute(
                        f"INSERT INTO {FTS} (rowid, terms) VALUES (?, ?)",
                        (c.sqlite_cursor.lastrowid, terms(r.text)),
                    )
            held = _held(c, context_hex, only)
            newest = {m: i for i, m, d, _ in held if visible.get(m) == d}  # the last one wins
            shown = set(newest.values())
            for row_id, _, _, was in held:
                if bool(was) != (row_id in shown):
                    c.execute(
                        f"UPDATE {TABLE} SET visible = ? WHERE id = ?",
                        (int(row_id in shown), row_id),
                    )
            c.execute(
                f"INSERT INTO {HEADS} (context_id, version) VALUES (?, ?) ON CONFLICT (context_id) "
                "DO UPDATE SET version = max(version, excluded.version)",
                (context_hex, head),
            )
            c.execute(f"DELETE FROM {PENDING} WHERE context_id = ?", (context_hex,))
        return True

    def _unchanged(self, c: Any, context_hex: str, head: int, read: Read) -> bool:
        """Whether the index still holds the version the reader started from, and every
        event it read is still stored."""
        c.execute(f"SELECT version FROM {HEADS} WHERE context_id = ?", (context_hex,))
        found = c.fetchone()
        c.execute(
            f"SELECT count(*) FROM {self.events_table} WHERE originator_id = ? "
            "AND originator_version > ? AND originator_version <= ?",
            (context_hex, read.since, head),
        )
        return (int(found[0]) if found else 0) == read.since and c.fetchone()[0] == read.events

    def forget(self, context_hex: str) -> None:
        with self.datastore.transaction(commit=True) as c:
            erase_rows(c, context_hex)

    def query(
        self, query: Query, where: SearchFilter, after: After | None, limit: int
    ) -> list[Found]:
        clauses, params = _filter(where)
        page = ""
        if after is not None:
            page = "WHERE score < ? OR (score = ? AND id > ?)"
            params += [after.score, after.score, after.key]
        sql = (
            f"SELECT * FROM (SELECT s.id, s.context_id, s.message_id, s.version, s.role, s.ts, "
            f"s.tenant, s.body, s.digest, s.visible, -bm25({FTS}) AS score, s.name FROM {FTS} "
            f"JOIN {TABLE} s ON s.id = {FTS}.rowid WHERE {FTS} MATCH ?{clauses}) {page} "
            "ORDER BY score DESC, id LIMIT ?"
        )
        with self.datastore.transaction(commit=False) as c:
            deep = levels(c)
        if deep > LEVELS:  # (left so by a version before the bound: written anew first)
            with self.datastore.transaction(commit=True) as c:
                keep_words_sound(c)
        with self.datastore.transaction(commit=False) as c:
            c.execute(sql, (query.fts5(), *params, limit))
            return [_found(r) for r in c.fetchall()]

    def reset(self) -> None:
        with self.datastore.transaction(commit=True) as c:
            c.execute(f"DELETE FROM {TABLE}")
            keep_words_sound(c)  # (an unreadable table's records are replaced first)
            c.execute(f"INSERT INTO {FTS} ({FTS}) VALUES ('delete-all')")
            c.execute(f"DELETE FROM {HEADS}")
            c.execute(f"DELETE FROM {PENDING}")
            c.execute(f"DELETE FROM {POSITION}")

    def count(self) -> int:
        with self.datastore.transaction(commit=False) as c:
            c.execute(f"SELECT count(*) FROM {TABLE}")
            return int(c.fetchone()[0])


def _held(c: Any, context_hex: str, only: set[str] | None) -> list[Any]:
    """(id, message id, digest, visible) of the context's rows (of the messages in `only`)."""
    if only is None:
        c.execute(
            f"SELECT id, message_id, digest, visible FROM {TABLE} WHERE context_id = ? ORDER BY id",
            (context_hex,),
        )
        return list(c.fetchall())
    found: list[Any] = []
    ids = sorted(only)
    for start in range(0, len(ids), 500):  # (SQLite's bound on parameters)
        chunk = ids[start : start + 500]
        c.execute(
            f"SELECT id, message_id, digest, visible FROM {TABLE} WHERE context_id = ? "
            f"AND message_id IN ({', '.join('?' * len(chunk))})",
            (context_hex, *chunk),
        )
        found += c.fetchall()
    return sorted(found, key=lambda r: r[0])


def _filter(where: SearchFilter) -> tuple[str, list[Any]]:
    return sql_filter(where, "?", "s.visible = 1", _one_of)


def _one_of(column: str, values: Sequence[str]) -> tuple[str, list[Any]]:
    if not values:  # (none given: nothing matches)
        return "0", []
    return f"{column} IN ({', '.join('?' * len(values))})", list(values)


def _found(r: Any) -> Found:
    row = SearchRow(
        context_hex=r[1], message_id=r[2], version=r[3], role=r[4], at=r[5], tenant=r[6],
        text=r[7], digest=r[8], name=r[11],
    )  # fmt: skip
    return Found(row=row, score=float(r[10]), key=int(r[0]), visible=bool(r[9]))


__all__ = ["DDL", "SQLiteSearchIndex", "erase_history_rows", "erase_rows", "purge_words"]
