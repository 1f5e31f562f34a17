"""PostgreSQL outages on a private cluster this test starts (bench/pg_cluster.py): a command
gives up within the configured bound, typed, and works again as soon as the server is back.
bench/bench_reliability.py measures the same with the default timeouts."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import pg_cluster
from bench_reliability import run_outages

from ctxstore.adapters.storage.postgres_bounds import RECONNECT_EVERY

CONNECT, STATEMENT = 2, 2
SLACK = 2.0  # seconds of scheduling noise on a loaded machine


@pytest.fixture
def outages() -> dict[str, float]:
    if not pg_cluster.available():
        reason = "PostgreSQL 15's initdb and pg_ctl are not installed"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the outage tests: {reason}")
        pytest.skip(reason)
    return run_outages(connect_timeout=CONNECT, statement_timeout=STATEMENT)


@pytest.mark.postgres
def test_outages_fail_within_the_configured_bound_and_recover_at_once(outages):
    # A stopped server: no connection within the connect timeout; nothing tried again.
    assert outages["stopped_write"] <= CONNECT + SLACK, outages
    assert outages["stopped_read"] <= CONNECT + SLACK, outages
    # Started again after a longer outage: the pool reconnects at most a second apart.
    assert outages["restart_to_write"] <= CONNECT + RECONNECT_EVERY + SLACK, outages
    # A frozen server: the statement is given up on after statement + connect timeout, and
    # finding out whether the write was stored is bounded the same way.
    assert outages["frozen_write"] <= 2 * (STATEMENT + CONNECT) + SLACK, outages
    assert outages["thaw_to_write"] <= CONNECT + SLACK, outages
