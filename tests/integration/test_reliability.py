"""Writer processes racing on one context, and a writer killed with SIGKILL, on SQLite and
PostgreSQL (bench/bench_reliability.py runs the same checks at full size)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from bench_reliability import run_crashes, run_mixed


def test_writer_processes_racing_on_one_context_lose_and_duplicate_nothing(durable_url):
    result = run_mixed(durable_url, writers=4, commands=40, seed=1)
    assert result["acknowledged"] == result["events"] - 1 >= 4 * 30


def test_sigkilled_writers_lose_no_acknowledged_event(durable_url):
    result = run_crashes(durable_url, kills=6, seed=2)
    assert result["acknowledged"] > 0 and result["lost"] == 0
