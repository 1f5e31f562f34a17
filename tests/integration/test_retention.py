"""Retention: a context expires after a period without writes; from then on no read or write
serves it, and a sweep erases it (an erasure record each, the sweep recorded)."""

from __future__ import annotations

import time

import pytest
from eventsourcing.cryptography import AESCipher
from fastapi.testclient import TestClient
from pydantic import SecretStr

from ctxstore import ContextNotFoundError, InvalidOperationError
from ctxstore.adapters.http import create_app
from ctxstore.adapters.settings import ServiceConfig, Settings, TokenGrant
from ctxstore.adapters.store.facade import ContextStore

MSG = [{"role": "user", "content": "hello"}]


@pytest.mark.parametrize("keys", [False, True], ids=["plain", "keys"])
def test_expired_contexts_are_served_to_no_one_and_swept(durable_url, keys):
    settings = Settings(encryption_key=SecretStr(AESCipher.create_key(32))) if keys else Settings()
    with ContextStore.from_url(durable_url, settings) as store:
        old = store.create(name="old", tenant="acme")
        other = store.create(name="other", tenant="globex")
        pinned = store.create(name="pinned", tenant="acme")
        for c in (old, other, pinned):
            store.insert(c, MSG)
        store.admin.set_retention(100, tenant="acme", actor="dpo", force=True)
        store.admin.set_retention(3600, context_id=pinned, actor="dpo")  # the most specific wins
        assert store.visible(old).version == 2  # written less than 100 s ago
        store._core.retention.clock = lambda: time.time() + 150  # 150 s later
        with pytest.raises(ContextNotFoundError, match="expired"):
            store.visible(old)
        with pytest.raises(ContextNotFoundError, match="expired"):
            store.insert(old, MSG)
        with pytest.raises(ContextNotFoundError):
            store.visible(old, at_version=1)
        assert store.visible(other).version == 2  # globex has no policy
        assert store.visible(pinned).version == 2
        listed = {c.context_id for c in store.contexts()}
        assert old not in listed and {other, pinned} <= listed  # nor does the listing
        sweep = store.admin.sweep()
        assert sweep.expired == [old] and not sweep.failed
        record = next(e for e in store.erasures() if e.context_id == old)
        assert record.actor == "ctxstore:retention" and "tenant:acme" in record.reason
        assert store.admin.sweeps()[0].id == sweep.id and store.admin.sweeps()[0].expired == [old]
        assert store.admin.sweep().expired == []  # nothing more to do
        assert [p.scope for p in store.admin.retention_policies()] == [
            f"context:{pinned.hex}",
            "tenant:acme",
        ]
        store.admin.set_retention(None, tenant="acme")
        assert [p.scope for p in store.admin.retention_policies()] == [f"context:{pinned.hex}"]
        assert store.verify().ok
        with pytest.raises(InvalidOperationError):
            store.admin.set_retention(-1, everything=True)
        with pytest.raises(InvalidOperationError):
            store.admin.set_retention(10, tenant="acme", everything=True)


def test_a_tenants_admin_sets_its_policy_and_the_service_sweeps(tmp_path):
    store = ContextStore.from_url(f"sqlite:///{tmp_path / 's.db'}")
    tokens = {
        "adm": TokenGrant(tenant="acme", scopes=["admin"]),
        "all": "acme",
        "glob": "globex",
    }
    config = ServiceConfig(tokens=tokens, sweep_seconds=0.2)
    try:
        with TestClient(create_app(store, config)) as client:
            acme = {"Authorization": "Bearer all"}
            glob = {"Authorization": "Bearer glob"}
            mine = client.post("/v1/contexts", json={}, headers=acme).json()["context_id"]
            theirs = client.post("/v1/contexts", json={}, headers=glob).json()["context_id"]
            r = client.put("/v1/retention",
                           json={"expire_after_seconds": 0.3, "force": True, "yes": True},
                           headers={"Authorization": "Bearer adm"})  # fmt: skip
            assert r.status_code == 200 and r.json()["scope"] == "tenant:acme"
            assert (
                client.put(
                    "/v1/retention",
                    json={"expire_after": "1s", "force": True, "yes": True},
                    headers=acme,
                ).status_code
                == 200
            )  # "all" includes admin
            assert client.put("/v1/retention", json={"expire_after": "1h",
                              "context_id": theirs}, headers=acme).status_code == 404  # fmt: skip
            assert client.get("/v1/retention", headers=glob).json() == []
            client.put(
                "/v1/retention",
                json={"expire_after_seconds": 0.3, "force": True, "yes": True},  # erases now
                headers=acme,
            )
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                if any(e.context_id.hex == mine.replace("-", "") for e in store.erasures()):
                    break
                time.sleep(0.1)
            assert client.get(f"/v1/contexts/{mine}", headers=acme).status_code == 404
            assert client.get(f"/v1/contexts/{theirs}", headers=glob).status_code == 200
            assert any(
                mine.replace("-", "") in [c.hex for c in s.expired] for s in store.admin.sweeps()
            )
            seen = client.get("/v1/sweeps", headers=acme).json()
            assert any(mine in s["expired"] for s in seen)
            assert all(not s["expired"] for s in client.get("/v1/sweeps", headers=glob).json())
    finally:
        store.close()


def test_the_command_line_sets_policies_and_sweeps(cli_like):
    run, _ = cli_like
    import json

    cid = json.loads(run("create", "--json").stdout)["context_id"]
    run("retention", "set", "--all", "--expire-after", "1s", "--force")
    assert json.loads(run("retention", "list", "--json").stdout)[0]["scope"] == "store"
    time.sleep(1.2)
    swept = json.loads(run("sweep", "--json").stdout)
    assert swept["expired"] == [cid]
    assert json.loads(run("sweeps", "--json").stdout)[0]["id"] == swept["id"]
    run("retention", "set", "--all", "--expire-after", "none")
    run("retention", "set", "--all", "--expire-after", "soon", code=2)


@pytest.fixture
def cli_like(tmp_path):
    from typer.testing import CliRunner

    from ctxstore.adapters.cli.app import app

    url = f"sqlite:///{tmp_path / 'cli.db'}"
    runner = CliRunner()

    def run(*args: str, code: int = 0):
        result = runner.invoke(app, ["--url", url, *args])
        assert result.exit_code == code, (args, result.output)
        return result

    return run, url


@pytest.mark.slow  # waits out the policy cache
def test_a_write_by_another_store_keeps_the_context_alive_for_a_store_with_it_cached(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    with ContextStore.from_url(url) as a, ContextStore.from_url(url) as b:
        cid = a.create(name="shared")
        a.insert(cid, MSG)
        a.admin.set_retention(4, context_id=cid, force=True)
        assert a.visible(cid).version == 2  # a caches it as written now
        time.sleep(2.5)
        b.insert(cid, MSG)  # b writes to it in time
        time.sleep(2.0)  # a's cached copy is now older than the policy allows; b's write not
        assert a.visible(cid).version == 3  # judged on what is stored, not on a's cache
        assert a.insert(cid, MSG).version == 4
