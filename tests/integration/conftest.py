"""Fixtures of the integration tests: a PostgreSQL store behind a proxy that loses the
reply to a committed write (bench/pg_proxy.py)."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from pg_proxy import LosingProxy


@pytest.fixture
def losing_proxy() -> Iterator[LosingProxy]:
    proxy = LosingProxy()
    yield proxy
    proxy.close()


@pytest.fixture
def proxied_store(
    pg_url: str, pg_admin_dsn: str, losing_proxy: LosingProxy
) -> Iterator[ContextStore]:
    """A store on a fresh schema of the test database, every connection through the proxy."""
    schema = f"t_{uuid.uuid4().hex[:10]}"
    info = psycopg.conninfo.conninfo_to_dict(pg_admin_dsn)
    info["dbname"] = pg_url.rsplit("/", 1)[1]
    with psycopg.connect(psycopg.conninfo.make_conninfo("", **info), autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    host_port = pg_url.split("@", 1)[1].split("/", 1)[0]
    url = pg_url.replace(host_port, f"127.0.0.1:{losing_proxy.port}") + f"?schema={schema}"
    with ContextStore.from_url(url, Settings(actor="t", snapshot_interval=1000)) as store:
        yield store
