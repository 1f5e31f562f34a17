"""Retention cannot erase the store on a typo: a period needs its unit, one under an hour
needs --force, the policy reads back in human units, a policy that would erase contexts now
says how many and asks (--yes for scripts), and `sweep --dry-run` names what a sweep would
erase without erasing it. The HTTP route takes the same units and refuses the same way."""

from __future__ import annotations

import json
import time

from fastapi.testclient import TestClient

from ctxstore.adapters.http import create_app
from ctxstore.adapters.settings import ServiceConfig
from ctxstore.adapters.store.facade import ContextStore


def test_a_bare_number_or_a_short_period_is_refused(cli):
    cid = json.loads(cli("create", "--json").stdout)["context_id"]
    said = cli("retention", "set", "--all", "--expire-after", "30", code=2).output
    assert "unit" in said and "30d" in said
    said = cli("retention", "set", "--all", "--expire-after", "30m", code=1).output
    assert "under an hour" in said and "--force" in said
    assert json.loads(cli("retention", "list", "--json").stdout) == []  # nothing was set
    done = cli("retention", "set", "--all", "--expire-after", "30d").stdout
    assert "expire after 30 days without writes" in done
    assert "2.592e+06" not in cli("retention", "list").stdout
    assert json.loads(cli("show", cid, "--json").stdout)["version"] == 1


def test_a_policy_that_erases_now_asks_first_and_a_dry_run_erases_nothing(cli):
    cid = json.loads(cli("create", "--json").stdout)["context_id"]
    time.sleep(1.1)
    said = cli("retention", "set", "--all", "--expire-after", "1s", "--force", code=1).output
    assert f"erase {cid}: all 1 events" in said and "--yes" in said
    assert json.loads(cli("retention", "list", "--json").stdout) == []
    cli("retention", "set", "--all", "--expire-after", "1s", "--force", "--yes")
    planned = json.loads(cli("sweep", "--dry-run", "--json").stdout)
    assert planned["would_erase"] == [cid] and planned["would_bound"] == []
    assert f"would erase {cid}" in cli("sweep", "--dry-run").stdout
    assert json.loads(cli("sweeps", "--json").stdout) == []  # a dry run is no sweep
    assert json.loads(cli("sweep", "--json").stdout)["expired"] == [cid]


def test_the_service_takes_units_and_refuses_short_periods(tmp_path):
    with ContextStore.from_url(f"sqlite:///{tmp_path / 's.db'}") as store:
        app = create_app(store, ServiceConfig(tokens={"t": "acme"}))
        with TestClient(app) as client:
            auth = {"Authorization": "Bearer t"}
            r = client.put("/v1/retention", json={"expire_after": "30"}, headers=auth)
            assert r.status_code == 422 and "unit" in r.json()["detail"]
            r = client.put("/v1/retention", json={"expire_after": "10m"}, headers=auth)
            assert r.status_code == 422 and "under an hour" in r.json()["detail"]
            r = client.put("/v1/retention", json={"expire_after_seconds": 30}, headers=auth)
            assert r.status_code == 422 and "force" in r.json()["detail"]
            r = client.put("/v1/retention", json={"expire_after": "30d"}, headers=auth)
            assert r.status_code == 200 and r.json()["expire_after"] == 2592000
