"""A policy that removes history says what it removes before it does: setting one asks with
the plan (contexts, events, versions) unless told yes, on every face; the dry run lists what
each bound and each expiry would remove, and the sweep then does exactly that; a partial
`retention set` keeps what it does not name."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from ctxstore import HistoryRemovedError
from ctxstore.adapters.cli.app import app
from ctxstore.adapters.http import create_app
from ctxstore.adapters.settings import ServiceConfig, TokenGrant
from ctxstore.adapters.store.facade import ContextStore


def _grow(store: ContextStore, cid: Any, events: int) -> None:
    for i in range(events):
        store.insert(cid, [{"role": "user", "content": f"turn {i}"}])


def _cli(url: str) -> Any:
    runner = CliRunner()

    def run(*args: str, code: int = 0) -> Any:
        result = runner.invoke(app, ["--url", url, "--actor", "dpo", *args])
        assert result.exit_code == code, (args, result.output)
        return result

    return run


def test_a_bound_asks_with_what_it_removes_and_the_dry_run_lists_it(durable_url):
    with ContextStore.from_url(durable_url) as store:
        cid = store.create(name="chat")
        _grow(store, cid, 19)  # versions 1..20
    run = _cli(durable_url)
    # Without --yes (and without a terminal) the policy is refused, naming what would go.
    said = run("retention", "set", "--context", str(cid), "--keep-latest", "3", code=1).output
    assert f"bound {cid}: remove 16 events, versions 2..16 no longer readable" in said
    assert "--yes" in said
    assert json.loads(run("retention", "list", "--json").stdout) == []
    run("retention", "set", "--context", str(cid), "--keep-latest", "3", "--yes")
    plan = json.loads(run("sweep", "--dry-run", "--json").stdout)
    assert plan["would_erase"] == []
    [bound] = plan["would_bound"]
    assert bound["context_id"] == str(cid) and bound["events_removed"] == 16
    assert bound["versions_lost"] == [2, 16] and bound["readable_from"] == 17
    text = run("sweep", "--dry-run").stdout
    assert "a sweep now would erase 0 context(s) (0 events), bound 1 (16 events removed)" in text
    assert f"would bound {cid}: remove 16 events" in text
    assert json.loads(run("show", str(cid), "--at-version", "3", "--json").stdout)  # untouched
    swept = json.loads(run("sweep", "--json").stdout)
    assert swept["trimmed"] == {str(cid): 16}  # exactly what the plan said
    with ContextStore.from_url(durable_url) as store:
        with pytest.raises(HistoryRemovedError):
            store.visible(cid, at_version=16)
        assert store.visible(cid, at_version=17).version == 17
    assert json.loads(run("sweep", "--dry-run", "--json").stdout)["would_bound"] == []


def test_an_expiry_asks_and_set_alone_keeps_the_bound(durable_url):
    with ContextStore.from_url(durable_url) as store:
        cid = store.create(name="chat")
        _grow(store, cid, 2)
    run = _cli(durable_url)
    run("retention", "set", "--all", "--keep-latest", "50")  # removes nothing now: no question
    time.sleep(1.1)
    said = run("retention", "set", "--all", "--expire-after", "1s", "--force", code=1).output
    assert f"erase {cid}: all 3 events" in said and "--yes" in said
    policy = json.loads(run("retention", "list", "--json").stdout)[0]
    assert policy["expire_after"] is None and policy["keep_latest"] == 50
    done = run("retention", "set", "--all", "--expire-after", "30d").stdout
    assert "expire after 30 days without writes; keep the latest 50 events" in done
    assert "was: keep the latest 50 events" in done
    done = run("retention", "set", "--all", "--keep-all").stdout
    assert "keep the latest" not in done.splitlines()[0]
    assert "store: expire after 30 days" in done
    done = run("retention", "remove", "--all").stdout
    assert "removed store: expire after 30 days" in done
    assert json.loads(run("retention", "list", "--json").stdout) == []


def test_a_missing_or_doubled_scope_names_the_three_options(durable_url):
    run = _cli(durable_url)
    for args in ([], ["--all", "--tenant", "acme"]):
        said = run("retention", "set", *args, "--keep-latest", "3", code=2).output
        flat = " ".join(said.split())
        assert "--context" in flat and "--tenant" in flat and "--all" in flat, said


def test_the_store_and_the_service_refuse_without_yes_and_answer_the_plan(durable_url):
    from ctxstore import RetentionConfirmationError

    with ContextStore.from_url(durable_url) as store:
        mine = store.create(name="mine", tenant="acme")
        theirs = store.create(name="theirs", tenant="globex")
        for c in (mine, theirs):
            _grow(store, c, 19)
        with pytest.raises(RetentionConfirmationError) as refused:
            store.admin.set_retention(None, keep_latest=3, everything=True)
        assert {b.context_id for b in refused.value.plan.bound} == {mine, theirs}
        assert store.admin.retention_policies() == []
        app_ = create_app(
            store, ServiceConfig(tokens={"t": TokenGrant(tenant="acme", scopes=["admin"])})
        )
        with TestClient(app_) as client:
            auth = {"Authorization": "Bearer t"}
            r = client.put("/v1/retention", json={"keep_latest": 3}, headers=auth)
            assert r.status_code == 409, r.text
            body = r.json()
            assert body["error"] == "RetentionConfirmationError"
            assert [b["context_id"] for b in body["plan"]["bound"]] == [str(mine)]  # not globex's
            assert client.get("/v1/retention", headers=auth).json() == []
            r = client.get("/v1/retention/plan", params={"keep_latest": 3}, headers=auth)
            assert [b["events_removed"] for b in r.json()["bound"]] == [16]
            r = client.put("/v1/retention", json={"keep_latest": 3, "yes": True}, headers=auth)
            assert r.status_code == 200 and r.json()["keep_latest"] == 3
            r = client.get("/v1/retention/plan", headers=auth)  # the tenant's only
            assert [b["context_id"] for b in r.json()["bound"]] == [str(mine)]
        assert [b.context_id for b in store.admin.sweep_plan().bound] == [mine]
        assert store.admin.sweep().trimmed == {str(mine): 16}
