"""Shared fixtures: one store fixture covers memory, SQLite and PostgreSQL."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store import ContextStore

DEFAULT_DSN = "host=127.0.0.1 port=5432 user=postgres dbname=postgres connect_timeout=3"


@pytest.fixture(scope="session")
def pg_admin_dsn() -> str:
    """A DSN of a PostgreSQL server that may create databases; skips (fails in CI) without one."""
    dsn = os.environ.get("CTXSTORE_TEST_DSN", DEFAULT_DSN)
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        reason = f"no PostgreSQL at {dsn!r} ({exc.__class__.__name__}); set CTXSTORE_TEST_DSN"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the PostgreSQL tests: {reason}")
        pytest.skip(reason)
    return dsn


@pytest.fixture(scope="session")
def pg_url(pg_admin_dsn: str) -> Iterator[str]:
    """A fresh database for this test session, dropped afterwards; as a store URL."""
    name = f"ctxstore_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    info = psycopg.conninfo.conninfo_to_dict(pg_admin_dsn)
    host, port, user = info.get("host", "127.0.0.1"), info.get("port", "5432"), info.get("user", "postgres")
    password = info.get("password")
    auth = f"{user}:{password}" if password else f"{user}"
    yield f"postgresql://{auth}@{host}:{port}/{name}"
    with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def make_url(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if kind == "memory":
        return "memory://"
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'events.db'}"
    base: str = request.getfixturevalue("pg_url")
    # One schema per test keeps tests independent inside the session's database.
    schema = f"t_{uuid.uuid4().hex[:10]}"
    admin = request.getfixturevalue("pg_admin_dsn")
    info = psycopg.conninfo.conninfo_to_dict(admin)
    info["dbname"] = base.rsplit("/", 1)[1]
    with psycopg.connect(psycopg.conninfo.make_conninfo(**info), autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    return f"{base}?schema={schema}"


BACKENDS = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
DURABLE_BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return make_url(request.param, tmp_path, request)


@pytest.fixture(params=DURABLE_BACKENDS)
def durable_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return make_url(request.param, tmp_path, request)


@pytest.fixture
def store(store_url: str) -> Iterator[ContextStore]:
    with ContextStore.from_url(store_url, Settings(snapshot_interval=5, actor="tester")) as s:
        yield s
