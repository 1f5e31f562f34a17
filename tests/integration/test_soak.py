"""The soak's short form (bench/soak.py): a minute of mixed traffic from writer
processes on PostgreSQL (a primary and a synchronous standby of its own) and on SQLite,
with model calls captured (Agents SDK, OpenTelemetry), the projections' workers, searches
and an MCP client reading beside them, while processes are killed, backends terminated,
the primary frozen and failed over, and the SQLite filesystem filled. Everything the soak
checks must hold."""

from __future__ import annotations

import math
import os
import pprint
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import pg_cluster
import soak
from soak_check import held

pytestmark = [pytest.mark.postgres, pytest.mark.slow]  # slow: a minute, servers of its own

SECONDS = float(os.environ.get("CTXSTORE_SOAK_SECONDS", "60"))


def test_a_minute_of_mixed_traffic_and_chaos_lose_and_double_nothing() -> None:
    if not pg_cluster.available():
        pytest.fail("PostgreSQL 15's binaries are needed for the soak's servers")
    found = soak.soak(SECONDS, writers=2)  # one on PostgreSQL, one on SQLite: the rest of
    # the suite runs beside it on this machine
    if held(found):
        pytest.fail(f"did not hold: {held(found)}\n{pprint.pformat(found)}")
    chaos = found["chaos"]
    assert chaos.get("failover") == 1 and chaos.get("kill") and chaos.get("terminate"), chaos
    acknowledged = sum(n for k, n in found["commands"].items() if k.endswith("acknowledged"))
    assert acknowledged > 200, found["commands"]
    assert found["audit"]["read"] > 0
    resumed = found["resumed after failover s"]
    assert len(resumed) == 1 and not math.isnan(resumed[0]), "no write went through afterwards"
    # the processes beside the writers did their work (what they did wrong: `held`)
    assert found["capture"]["calls made"] > 0 and found["capture"]["calls captured"] > 0
    assert found["search"]["queries"] > 0
    reads = found["reads"]
    for done in ("work-pg refresh ok", "work-lite refresh ok", "search-pg search ok",
                 "search-lite search ok", "mcp-pg read_context ok", "mcp-pg search ok"):  # fmt: skip
        assert reads[done] > 0, (done, reads)
