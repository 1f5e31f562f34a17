"""A small pool of its own for a vault on another PostgreSQL server."""

from __future__ import annotations

from typing import Any

from psycopg_pool import ConnectionPool

from ctxstore.adapters.storage import postgres_schema
from ctxstore.adapters.storage.urls import library_env


def own_pool(url: str) -> tuple[ConnectionPool[Any], str]:
    env = library_env(url)
    pool: ConnectionPool[Any] = ConnectionPool(
        postgres_schema.conninfo(env), min_size=1, max_size=4, open=True,
        kwargs={"autocommit": True}, timeout=float(env.get("POSTGRES_CONNECT_TIMEOUT", "10")),
    )  # fmt: skip
    return pool, env.get("POSTGRES_SCHEMA", "").strip() or "public"
