"""PostgreSQL outages on a private cluster this test starts (bench/pg_cluster.py): a command
against a stopped or frozen server fails typed after one wait for a connection (the library
used to retry ten times, each a full wait), and works again once the server is back.
No duration is asserted here: a loaded machine would make such a test flaky.
bench/bench_reliability.py measures how long each takes, with the default timeouts."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from eventsourcing.persistence import OperationalError

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import pg_cluster
from bench_reliability import run_outages

from ctxstore.adapters.storage import postgres_bounds

pytestmark = pytest.mark.slow  # a server of its own stopped and frozen


@pytest.mark.postgres
def test_outages_wait_once_fail_typed_and_recover():
    if not pg_cluster.available():
        reason = "PostgreSQL 15's initdb and pg_ctl are not installed"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the outage tests: {reason}")
        pytest.skip(reason)
    # run_outages asserts each failure is a StoreUnavailableError and that writes go
    # through again after a restart and after a thaw (within 60 s, else it fails).
    found = run_outages(connect_timeout=2, statement_timeout=2)
    # At most: an idle connection the stop broke (it fails at once), then one real wait.
    assert found["stopped_write_connection_waits"] <= 2, found
    assert found["stopped_read_connection_waits"] <= 2, found


class _Pool:
    def __init__(self) -> None:
        self.checked = 0

    def check(self) -> None:
        self.checked += 1


def test_a_call_is_tried_once_more_only_when_its_connection_broke_at_once(monkeypatch):
    pool = _Pool()
    calls = []

    def broken(*args: object) -> None:
        calls.append(args)
        raise OperationalError("server closed the connection unexpectedly")

    bounded = postgres_bounds._once_more(broken, pool)
    with pytest.raises(OperationalError):
        bounded("x")
    assert len(calls) == 2 and pool.checked == 1  # once more, after dropping broken ones
    ticks = iter([0.0, postgres_bounds.FAST_FAILURE + 1])  # a slow failure: no second try
    monkeypatch.setattr(postgres_bounds.time, "monotonic", lambda: next(ticks))
    calls.clear()
    with pytest.raises(OperationalError):
        bounded("y")
    assert len(calls) == 1
