"""Writer processes racing on one context, and a writer killed with SIGKILL, on SQLite and
PostgreSQL (bench/bench_reliability.py runs the same checks at full size)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from bench_reliability import run_crashes, run_lost_replies, run_mixed

pytestmark = pytest.mark.slow  # writer processes racing and killed


def test_writer_processes_racing_on_one_context_lose_and_duplicate_nothing(durable_url):
    result = run_mixed(durable_url, writers=4, commands=40, seed=1)
    assert result["acknowledged"] == result["events"] - 1 >= 4 * 30


def test_sigkilled_writers_lose_no_acknowledged_event(durable_url):
    result = run_crashes(durable_url, kills=6, seed=2)
    assert result["acknowledged"] > 0 and result["lost"] == 0


@pytest.mark.postgres
def test_lost_replies_neither_double_nor_lose_a_command(pg_url):
    """One reply in four to a committed write is lost on its way back: every acknowledged
    insert is stored once, every compaction written once, the chain verifies."""
    result = run_lost_replies(pg_url, commands=60, every=4, seed=3)
    assert result["replies_lost"] > 5 and result["doubled"] == result["lost"] == 0
    assert result["stored"] == result["acknowledged"]


@pytest.mark.postgres
def test_postgres_connections_dropped_mid_stream(pg_url, pg_admin_dsn):
    """The server ends every connection of the store's database several times while it
    writes (what a restart does to clients): writes go on over new connections, or fail
    with a clear error; nothing acknowledged is lost."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    from ctxstore.adapters.store.facade import ContextStore

    info = conninfo_to_dict(pg_admin_dsn)
    info["dbname"] = pg_url.rsplit("/", 1)[1]
    acked, failed = [], []
    with ContextStore.from_url(pg_url) as store:
        cid = store.create(name="connections dropped")
        for i in range(60):
            if i % 10 == 5:
                with psycopg.connect(make_conninfo("", **info), autocommit=True) as conn:
                    conn.execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                    )
            try:
                acked.append(store.insert(cid, [{"role": "user", "content": f"m{i}"}]).version)
            except Exception as exc:  # noqa: BLE001 - what matters is what it is, below
                assert type(exc).__module__.startswith(("eventsourcing", "ctxstore")), repr(exc)
                failed.append(i)
    with ContextStore.from_url(pg_url) as store:
        history = store.history(cid)
        assert {h.version for h in history} >= set(acked)
        assert len(history) == 1 + len(acked)  # a failed write wrote nothing
        assert len(acked) >= 50, failed
