"""Roles: every route admits only the scopes its table names (write, read, audit, admin),
the OpenAPI description says which, an auditor sees its tenant's audit and writes nothing,
and tokens kept hashed in the database (`ctxstore token`) authenticate until revoked."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from ctxstore.adapters.http import create_app
from ctxstore.adapters.http.scopes import ROUTE_SCOPES, needed
from ctxstore.adapters.settings import ServiceConfig, TokenGrant
from ctxstore.adapters.storage import tokens as stored_tokens
from ctxstore.adapters.store.facade import ContextStore

from ..integration.test_at_rest import raw_bytes

GRANTS = {
    "tok-read": TokenGrant(tenant="acme", scopes=["read"]),
    "tok-write": TokenGrant(tenant="acme", scopes=["write"]),
    "tok-audit": TokenGrant(tenant="acme", scopes=["audit"]),
    "tok-admin": TokenGrant(tenant="acme", scopes=["admin"]),
    "tok-all": "acme",
    "tok-globex": "globex",
}
SCOPE_OF = {"tok-read": "read", "tok-write": "write", "tok-audit": "audit", "tok-admin": "admin"}


@pytest.fixture
def app_store(tmp_path):
    store = ContextStore.from_url(f"sqlite:///{tmp_path / 's.db'}")
    yield store
    store.close()


def _client(store: ContextStore, tokens=None) -> TestClient:
    return TestClient(create_app(store, ServiceConfig(tokens=tokens or GRANTS)))


def test_every_route_names_its_scopes_in_the_table_and_in_openapi(app_store):
    with _client(app_store) as client:
        spec = client.get("/openapi.json").json()
    seen = set()
    for path, item in spec["paths"].items():
        if path == "/health":
            continue
        for method, operation in item.items():
            scopes = needed(method, path)
            assert scopes, f"{method.upper()} {path} is in no scope"
            assert operation["security"] == [{"bearer": sorted(scopes)}]
            assert "403" in operation["responses"]
            seen.add((method.upper(), path))
    assert seen == set(ROUTE_SCOPES)  # the table names no route that is gone


def test_each_token_reaches_exactly_the_routes_its_scopes_admit(app_store):
    with _client(app_store) as client:
        all_ = {"Authorization": "Bearer tok-all"}
        cid = client.post("/v1/contexts", json={"name": "c"}, headers=all_).json()["context_id"]
        client.post(f"/v1/contexts/{cid}/insert", headers=all_,
                    json={"messages": [{"role": "user", "content": "hi"}]})  # fmt: skip
        for (method, template), admits in ROUTE_SCOPES.items():
            path = template.format(context_id=cid, number=1, sha256="0" * 64)
            for token, scope in SCOPE_OF.items():
                if scope in admits and template.endswith("events"):
                    continue  # an admitted live tail never ends: the forbidden case suffices
                if scope in admits and (method, template) == (
                    "DELETE",
                    "/v1/contexts/{context_id}",
                ):
                    continue  # erasing it would change the rest of the walk
                r = client.request(method, path, headers={"Authorization": f"Bearer {token}"},
                                   json={} if method == "POST" else None)  # fmt: skip
                if scope in admits:
                    assert r.status_code != 403, (method, template, token, r.text)
                else:
                    assert r.status_code == 403, (method, template, token, r.status_code)
                    assert r.json()["type"].endswith("forbidden")
        # Nothing a forbidden request asked for was done.
        assert client.get(f"/v1/contexts/{cid}", headers=all_).json()["version"] >= 2
        erased = client.delete(f"/v1/contexts/{cid}?reason=asked&with_forks=true",
                               headers={"Authorization": "Bearer tok-admin"})  # fmt: skip
        assert erased.status_code == 200, erased.text


def test_an_auditor_sees_its_tenants_audit_and_writes_nothing(app_store):
    with _client(app_store) as client:
        acme = {"Authorization": "Bearer tok-all"}
        globex = {"Authorization": "Bearer tok-globex"}
        auditor = {"Authorization": "Bearer tok-audit"}
        mine = client.post("/v1/contexts", json={"name": "mine"}, headers=acme).json()["context_id"]
        theirs = client.post("/v1/contexts", json={"name": "x"}, headers=globex).json()[
            "context_id"
        ]
        page = client.get("/v1/audit", headers=auditor).json()
        assert {e["context_id"] for e in page["entries"]} == {mine}
        assert client.get(f"/v1/contexts/{theirs}/history", headers=auditor).status_code == 404
        assert client.get(f"/v1/contexts/{mine}/verify", headers=auditor).status_code == 200
        assert client.get(f"/v1/contexts/{mine}/export", headers=auditor).status_code == 200
        r = client.post(f"/v1/contexts/{mine}/insert", headers=auditor,
                        json={"messages": [{"role": "user", "content": "no"}]})  # fmt: skip
        assert r.status_code == 403
        assert client.delete(f"/v1/contexts/{mine}?reason=x", headers=auditor).status_code == 403
        assert client.get(f"/v1/contexts/{mine}", headers=acme).json()["version"] == 1


def test_tokens_kept_hashed_in_the_database_authenticate_until_revoked(app_store, monkeypatch):
    monkeypatch.setattr(stored_tokens, "CACHE_SECONDS", 0.0)
    token, listed = app_store.admin.create_token("acme", "read,write", name="sdk")
    assert listed.scopes == ["read", "write"] and token.startswith("ctxs_")
    with TestClient(create_app(app_store, ServiceConfig())) as client:  # none configured
        assert client.get("/v1/contexts").status_code == 401  # a stored token is required now
        ok = {"Authorization": f"Bearer {token}"}
        cid = client.post("/v1/contexts", json={"name": "c"}, headers=ok).json()["context_id"]
        assert client.get(f"/v1/contexts/{cid}", headers=ok).status_code == 200
        assert client.get("/v1/audit", headers=ok).status_code == 403  # no audit scope
        wrong = {"Authorization": f"Bearer {token[:-2]}xx"}
        assert client.get("/v1/contexts", headers=wrong).status_code == 401
        app_store.admin.revoke_token(listed.id)
        assert client.get("/v1/contexts", headers=ok).status_code == 401
    secret = token.split("_", 2)[2]  # ctxs_<hex id>_<secret>: the secret may hold "_" itself
    assert secret.encode() not in raw_bytes(app_store.url, app_store)
    assert [t.revoked is not None for t in app_store.admin.tokens()] == [True]
    with pytest.raises(Exception, match="scopes must be"):
        app_store.admin.create_token("acme", "read,delete")
