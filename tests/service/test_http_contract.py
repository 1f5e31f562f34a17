"""The service's documented contract: an overlong actor is refused (not cut), and the OpenAPI
description names every problem+json response, never FastAPI's validation shape."""

import httpx

from ctxstore.adapters.http import create_app
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.domain.limits import MAX_ACTOR


def test_an_overlong_actor_is_refused_and_nothing_written(sqlite_service):
    store = sqlite_service.store
    cid = store.create(tenant="acme")
    before = store.visible(cid).version
    response = httpx.post(
        f"{sqlite_service.url}/v1/contexts/{cid}/insert",
        json={"messages": [{"role": "user", "content": "hi"}]},
        headers={"Authorization": "Bearer tok-acme", "X-Ctxstore-Actor": "a" * (MAX_ACTOR + 1)},
    )
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert "X-Ctxstore-Actor" in response.json()["detail"]
    assert store.visible(cid).version == before


def test_openapi_documents_every_problem_response():
    with ContextStore.from_url("memory://") as store:
        schema = create_app(store).openapi()
    assert "HTTPValidationError" not in str(schema)
    insert = schema["paths"]["/v1/contexts/{context_id}/insert"]["post"]["responses"]
    for status in ("401", "404", "409", "413", "415", "422", "500", "503"):
        content = insert[status]["content"]
        assert list(content) == ["application/problem+json"], status
    assert "Retry-After" in insert["503"]["headers"]


def test_every_status_sent_to_hostile_requests_is_documented(tmp_path):
    """Each operation, sent a body of another type, one over the size limit, JSON cut
    short and no token: whatever it answers is in its OpenAPI responses, as problem+json."""
    import re

    from fastapi.testclient import TestClient

    from ctxstore.adapters.settings import ServiceConfig

    with ContextStore.from_url(f"sqlite:///{tmp_path / 'c.db'}") as store:
        cid = store.create(tenant="t")
        app = create_app(store, ServiceConfig(tokens={"tok": "t"}, max_body_bytes=1024))
        schema, client = app.openapi(), TestClient(app)
        auth = {"Authorization": "Bearer tok"}
        sends = {
            "text": (b"x", {**auth, "Content-Type": "text/plain"}),
            "large": (b"{" + b" " * 5000 + b"}", {**auth, "Content-Type": "application/json"}),
            "cut": (b'{"a": ', {**auth, "Content-Type": "application/json"}),
            "anonymous": (b"{}", {"Content-Type": "application/json"}),
        }
        undocumented = []
        for path, item in schema["paths"].items():
            if path.endswith("/events"):
                continue  # a live tail answers by streaming; tested in test_tail_http.py
            url = path.replace("{context_id}", str(cid)).replace("{sha256}", "0" * 64)
            url = re.sub(r"\{[^}]+\}", "1", url)
            for method, operation in item.items():
                for label, (body, headers) in sends.items():
                    got = client.request(method.upper(), url, content=body, headers=headers)
                    documented = operation["responses"].get(str(got.status_code))
                    if documented is None or (
                        got.status_code >= 400
                        and "application/problem+json" not in documented["content"]
                    ):
                        undocumented.append((method, path, label, got.status_code))
        assert not undocumented


def test_json_cut_short_is_said_by_line_and_column(sqlite_service):
    cid = sqlite_service.store.create(tenant="acme")
    response = httpx.post(
        f"{sqlite_service.url}/v1/contexts/{cid}/insert",
        content=b'{"messages": [\n  {"role": "user", "content": "hi}\n]}',
        headers={"Authorization": "Bearer tok-acme", "Content-Type": "application/json"},
    )
    assert response.status_code == 422
    said = response.json()
    assert said["errors"][0]["loc"] == ["body"]
    assert "not valid JSON" in said["detail"] and "at line 2, column" in said["detail"]


def test_an_overlong_actor_with_an_idempotency_key_is_refused_as_without(sqlite_service):
    """The idempotency guard reads the caller before claiming the key: a bad actor header
    is the same 422 with a key as without one, nothing claimed and nothing written."""
    store = sqlite_service.store
    cid = store.create(tenant="acme")
    url = f"{sqlite_service.url}/v1/contexts/{cid}/insert"
    body = {"messages": [{"role": "user", "content": "hi"}]}
    auth = {"Authorization": "Bearer tok-acme"}
    bad = {**auth, "X-Ctxstore-Actor": "a" * (MAX_ACTOR + 1), "Idempotency-Key": "k-1"}
    refused = httpx.post(url, json=body, headers=bad)
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"] == "InvalidOperationError"
    again = httpx.post(url, json=body, headers={**auth, "Idempotency-Key": "k-1"})
    assert again.status_code == 200 and "Idempotent-Replayed" not in again.headers
    assert store.visible(cid).version == 2


def test_choosing_the_id_of_ones_own_context_is_a_conflict(sqlite_service):
    """The README's promise: a chosen id that is taken answers 409, whether it is the id
    chosen before or the id that creation returned; another tenant's id is no conflict."""
    auth = {"Authorization": "Bearer tok-acme"}
    url = f"{sqlite_service.url}/v1/contexts"
    chosen = "0b8f5a1e-8c59-4d0c-9d32-4a1c7a2f0001"
    made = httpx.post(url, json={"context_id": chosen}, headers=auth)
    assert made.status_code == 201
    given = made.json()["context_id"]
    for taken in (chosen, given):
        again = httpx.post(url, json={"context_id": taken}, headers=auth)
        assert again.status_code == 409, again.text
        assert again.json()["error"] == "ContextExistsError"
    listed = httpx.get(url, headers=auth).json()
    assert [c["context_id"] for c in listed] == [given]
