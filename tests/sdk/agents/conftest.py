"""The OpenAI Agents SDK's own session tests (tests/memory/test_session.py and
test_session_limit.py from the openai-agents 0.24.0 sdist, MIT License, Copyright (c) 2025
OpenAI), run against CtxStoreSession on SQLite and PostgreSQL, over the sync store, over
the async one and through a tenant's HTTP client.

The files are the SDK's, changed only in their imports. The sessions they make as
`SQLiteSession(session_id, db_path)` (sdk_helpers.py) are CtxStoreSessions here: on a ctxstore SQLite file at
that path, or on a fresh PostgreSQL schema. The tests that inspect SQLiteSession's own
machinery (its worker-thread connections, rows it corrupts with raw SQL, its lock) test
that class, not the session protocol: they are deselected, by name, below.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the vendored files import each other

SQLITE_MACHINERY = (  # substrings of the deselected tests' names, and why
    "connections",  # SQLiteSession's per-thread connections
    "corrupt",  # rows SQLiteSession wrote, corrupted with raw SQL
    "closed",  # SQLiteSession.close() refusing later calls
    "cancellation_hides",  # SQLiteSession's private _await_mutation
    "file_lock",  # SQLiteSession's process-local lock per file
    "releases_write_lock",
    "rolls_back",
    "rollback_failure",
    "quarantined",
    "post_commit_cancellation",  # SQLite write locks and connections it monkeypatches
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = str(Path(__file__).parent)
    machinery = [
        i for i in items
        if str(i.path).startswith(here) and any(s in i.name for s in SQLITE_MACHINERY)
    ]  # fmt: skip
    if machinery:
        config.hook.pytest_deselected(items=machinery)
        items[:] = [i for i in items if i not in machinery]


@pytest.fixture(
    autouse=True,
    params=[
        "sqlite", "sqlite-async", "sqlite-http",
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("postgres-async", marks=pytest.mark.postgres),
        pytest.param("postgres-http", marks=pytest.mark.postgres),
    ],
)  # fmt: skip
def sdk_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """The backend, and the store: sync (its calls on threads) or async (ctxstore.aopen's:
    adds and reads awaited on the loop)."""
    import sdk_helpers  # type: ignore[import-not-found]  # (beside it: see sys.path above)

    from tests.conftest import make_url  # the suite's own: a fresh schema per test

    kind, _, mode = request.param.partition("-")
    url = None if kind == "sqlite" else make_url("postgres", tmp_path, request)
    sdk_helpers.BACKEND.update(url=url, mode=mode or "sync")
    yield request.param
    sdk_helpers.BACKEND.update(url=None, mode="sync")
