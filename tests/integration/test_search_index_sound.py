"""The search index stays sound where the databases' own rules could break it.

SQLite's stays readable through any number of erasures: FTS5 (before
SQLite 3.45) puts each merge that purges an erased context's words one level deeper, and
reads a structure of about 2,000 levels as corrupt, which refused every later search and
every erasure of an indexed context (found by the soak). The words are written anew from
the rows past a bound, and a table left unreadable by an earlier version is mended.
PostgreSQL's catch-up never skips an event committed after a newer one (ids are taken at
insert, not at commit)."""

from __future__ import annotations

import random
import sqlite3
from typing import Any

import psycopg

from ctxstore.adapters.storage import sqlite_search
from ctxstore.adapters.storage.search_index import TABLE
from ctxstore.adapters.storage.sqlite_search import DDL, FTS, LEVELS, levels, terms
from ctxstore.adapters.store.facade import ContextStore


def index() -> Any:
    c = sqlite3.connect(":memory:", isolation_level=None).cursor()
    for statement in DDL:
        c.execute(statement)
    return c


def add_row(c: Any, n: int) -> None:
    c.execute("BEGIN")
    c.execute(
        f"INSERT INTO {TABLE} (context_id, message_id, version, role, ts, body, digest) "
        "VALUES (?, ?, 1, 'user', 0, ?, '')",
        (f"c{n}", f"m{n}", f"word{n} common"),
    )
    c.execute(
        f"INSERT INTO {FTS} (rowid, terms) VALUES (?, ?)", (c.lastrowid, terms(f"word{n} common"))
    )
    c.execute("COMMIT")


def found(c: Any, word: str) -> int:
    c.execute(f"SELECT count(*) FROM {FTS} WHERE {FTS} MATCH ?", (word,))
    return int(c.fetchone()[0])


def test_purging_words_after_every_erasure_never_deepens_the_index_past_its_bound():
    c, rng, made = index(), random.Random(7), 0
    for step in range(4000):  # (unbounded, FTS5 3.40 reads it as corrupt near step 3,300)
        for _ in range(rng.randint(0, 3)):
            made += 1
            add_row(c, made)
        if step % 3 == 0:
            c.execute("BEGIN")
            sqlite_search.purge_words(c)
            c.execute("COMMIT")
        assert levels(c) <= LEVELS + 1
    assert found(c, "common") == made and found(c, f"word{made}") == 1


def test_a_store_whose_index_was_left_unreadable_searches_and_erases_again(tmp_path):
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with ContextStore.from_url(url) as store:
        kept = store.create(name="kept")
        store.insert(kept, [{"role": "user", "content": "the weather in Lisbon"}])
        gone = store.create(name="gone")
        store.insert(gone, [{"role": "user", "content": "the weather in Porto"}])
        assert len(store.search("weather").hits) == 2
    deep = sqlite3.connect(tmp_path / "store.db", isolation_level=None)
    block = deep.execute(f"SELECT block FROM {FTS}_data WHERE id = 10").fetchone()[0]
    # an earlier version's 2,002 empty levels: FTS5 cannot open the table
    broken = bytes(block[:4]) + bytes([0x8F, 0x52]) + bytes(4000)
    deep.execute(f"UPDATE {FTS}_data SET block = ? WHERE id = 10", (broken,))
    deep.close()
    check = sqlite3.connect(tmp_path / "store.db")
    try:
        check.execute(f"SELECT count(*) FROM {FTS} WHERE {FTS} MATCH 'weather'").fetchone()
        unreadable = False
    except sqlite3.DatabaseError:
        unreadable = True
    check.close()
    assert unreadable
    with ContextStore.from_url(url) as store:
        store.erase(gone, reason="asked")
        hits = store.search("weather").hits
        assert [h.context_id for h in hits] == [kept]


def test_a_search_never_trusts_the_newest_id_while_a_transaction_is_in_progress(pg_url):
    """PostgreSQL takes an event's id when it is inserted, not when it commits: while any
    transaction is in progress, one may still commit an id below the newest, so the
    catch-up's shortcut ("no event since the last one") is not taken (-1)."""
    with ContextStore.from_url(pg_url) as store:
        cid = store.create(name="s")
        store.insert(cid, [{"role": "user", "content": "the weather in Lisbon"}])
        index = store._core.storage.search_index
        assert index is not None and index.newest_event() > 0
        with psycopg.connect(pg_url) as other:
            other.execute("SELECT pg_current_xact_id()")  # a transaction holding an id
            assert index.newest_event() == -1
            other.rollback()
        assert index.newest_event() > 0
