"""The store's pooled connections. SQLite's keep their compiled statements
(storage/sqlite_pool.py): the library's own pool opens them with a cache of one statement,
so an append compiled each of its statements again every time. PostgreSQL's pool hands out
the connection returned last (storage/postgres_bounds.py): psycopg_pool's turn by turn woke
a cold server process for each statement."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ctxstore.adapters.settings import Settings
from ctxstore.adapters.storage.sqlite_pool import StatementCachingPool
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.adapters.store.parts import parts_of


def test_every_connection_of_a_sqlite_store_comes_from_the_caching_pool(tmp_path: Path) -> None:
    with ContextStore.from_url(f"sqlite:///{tmp_path / 's.db'}", Settings(actor="t")) as store:
        cid = store.create()
        store.insert(cid, {"role": "user", "content": "hi"})
        assert store.visible(cid).messages[0].content == "hi"
        recorder: Any = parts_of(store).storage.recorder
        pool = recorder.datastore.pool
        assert isinstance(pool, StatementCachingPool)
        conn = pool.get_connection(is_writer=True)
        try:  # (the file is in WAL mode, as the library leaves it)
            assert conn._sqlite_conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        finally:
            pool.put_connection(conn)


@pytest.mark.postgres
def test_the_postgres_pool_hands_out_the_connection_returned_last(pg_template: Any) -> None:
    url = pg_template.copy()
    try:
        with ContextStore.from_url(url, Settings(actor="t")) as store:
            store.insert(store.create(), {"role": "user", "content": "hi"})  # the pool fills
            recorder: Any = parts_of(store).storage.recorder
            pool = recorder.datastore.pool
            pool.wait()
            first, second = pool.getconn(), pool.getconn()
            pool.putconn(first)
            pool.putconn(second)
            for _ in range(3):  # the same one each time, while it is returned in between
                again = pool.getconn()
                pool.putconn(again)
                assert again is second
    finally:
        pg_template.release(url)
