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
