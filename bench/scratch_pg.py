"""Scratch PostgreSQL databases for the benchmarks: created on demand, dropped at the end."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg


def settle(conn: psycopg.Connection[Any]) -> None:
    """Flush the server's dirty pages now (CHECKPOINT), so that what an earlier section
    wrote (LangGraph's savers write ~150 MB) is not flushed while the next one is timed."""
    try:
        conn.execute("CHECKPOINT")
    except psycopg.errors.InsufficientPrivilege:
        print("(CHECKPOINT not allowed for this role: sections may feel each other's writes)")


@contextmanager
def scratch_databases(admin_url: str) -> Iterator[Callable[[], str]]:
    """`make()` creates a new database, settles the server and returns the database's URL;
    all are dropped on exit."""
    names: list[str] = []

    def make() -> str:
        name = f"ctxstore_bench_{os.getpid()}_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
            settle(conn)
        names.append(name)
        return admin_url.rsplit("/", 1)[0] + f"/{name}"

    try:
        yield make
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            for name in names:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
