"""The API describes itself: /docs and /redoc served from the service's own files (no CDN),
open to all while every data route keeps its token; operation ids named as the contract."""

import re
from pathlib import Path

import httpx

from ctxstore.adapters.store.contract import OPERATIONS

ASSET = re.compile(r"""(?:src|href)\s*=\s*["']([^"']+)["']""")


def test_the_api_pages_load_only_the_services_own_files(sqlite_service):
    for page in ("/docs", "/redoc"):
        answer = httpx.get(sqlite_service.url + page)  # no token: the pages hold no data
        assert answer.status_code == 200 and "text/html" in answer.headers["content-type"]
        assets = ASSET.findall(answer.text)
        assert any(a.endswith(".js") for a in assets), answer.text
        assert "http://" not in answer.text and "https://" not in answer.text  # no CDN
        for asset in assets:
            assert asset.startswith("/") and not asset.startswith("//"), asset
            served = httpx.get(sqlite_service.url + asset)
            assert served.status_code == 200 and served.content, asset
        assert "/openapi.json" in answer.text


def test_the_pages_are_open_but_the_data_is_not(sqlite_service):
    assert httpx.get(sqlite_service.url + "/openapi.json").status_code == 200
    assert httpx.get(sqlite_service.url + "/v1/contexts").status_code == 401
    with sqlite_service.client("tok-acme") as client:
        client.create(name="seen with a token")
        assert [c.name for c in client.contexts()] == ["seen with a token"]


def test_operation_ids_are_readable_unique_and_the_contracts_names(sqlite_service):
    spec = httpx.get(sqlite_service.url + "/openapi.json").json()
    ids = {
        (method.upper(), path): op["operationId"]
        for path, item in spec["paths"].items()
        for method, op in item.items()
    }
    listed = list(ids.values())
    assert len(listed) == len(set(listed)), sorted(i for i in listed if listed.count(i) > 1)
    assert all(re.fullmatch(r"[a-z][a-z0-9_]*", i) and "_v1_" not in i for i in listed), listed
    routed = {(op.method, op.path): name for name, op in OPERATIONS.items() if op.route}
    assert routed and routed.keys() <= ids.keys()
    assert {ids[route]: name for route, name in routed.items()} == {
        name: name for name in routed.values()
    }


def test_the_pages_python_client_session_runs_as_written(sqlite_service, capsys):
    page = Path(__file__).resolve().parents[2] / "docs" / "how-to" / "http-service.md"
    blocks = re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.DOTALL)
    session = next(b for b in blocks if "CtxStoreClient(" in b)
    exec(session.replace("http://127.0.0.1:8080", sqlite_service.url), {})  # noqa: S102
    visible, types = capsys.readouterr().out.splitlines()
    assert visible == str([{"role": "user", "content": "Where is my order?"}])
    assert types.startswith("['create', 'insert', 'batch_start'"), types
    assert "/docs" in page.read_text()


def test_every_operation_taking_a_body_lists_the_refusal_of_a_bad_one(sqlite_service):
    """A client generated from the description learns of the 422 each body route sends
    (POST /v1/blobs too: bytes its declared media type contradicts)."""
    paths = httpx.get(f"{sqlite_service.url}/openapi.json").json()["paths"]
    missing = [
        f"{method.upper()} {path}"
        for path, methods in paths.items()
        for method, op in methods.items()
        if path.startswith("/v1") and method in ("post", "put", "patch")
        and "422" not in op.get("responses", {})
    ]  # fmt: skip
    assert not missing, missing
    assert "422" in paths["/v1/blobs"]["post"]["responses"]
