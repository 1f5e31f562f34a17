"""MCP under bad input and across tenants, through the official SDK's client over
streamable HTTP: a tool called with arguments of the wrong type answers a tool error naming
the argument; another tenant's context ids answer exactly as ids that exist nowhere; a
server offering writes at /mcp still lets only an admin token of the context's tenant
erase (a read or write token is refused, whatever the server offers); hostile search text
is a typed tool error or an answer, never a failure of the engine."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import pytest
from fastapi import FastAPI
from mcp.client import ClientSession
from mcp.client.streamable_http import streamable_http_client

from ctxstore.adapters.http.auth import Tokens
from ctxstore.adapters.http.deps import Service
from ctxstore.adapters.settings import ServiceConfig, TokenGrant
from ctxstore.adapters.store.facade import ContextStore

from ..conftest import free_port, served
from .test_mcp import SECRET, _said, _seed

TOKENS: dict[str, Any] = {
    "token-acme": "acme",  # every scope
    "token-globex": "globex",
    "token-acme-reader": TokenGrant(tenant="acme", scopes=["read"]),
    "token-acme-writer": TokenGrant(tenant="acme", scopes=["read", "write", "audit"]),
    "token-acme-admin": TokenGrant(tenant="acme", scopes=["read", "admin"]),
    "token-globex-admin": TokenGrant(tenant="globex", scopes=["read", "admin"]),
}
HOSTILE = [
    'NEAR("a" b)', '"unbalanced', "col:x ^y *", "AND OR NOT", "(((", "'; DROP TABLE x; --",
    "a\x00b", "\ud800 lone", "会议记录没有空格", "x" * 1000, "   ",
]  # fmt: skip
LONE = "\ud800 lone"  # a lone surrogate: no UTF-8 encodes it, JSON escapes it


# What a database's own error says (never what a caller may see).
ENGINE_ERRORS = ("Traceback", "OperationalError", "sqlite3", "psycopg", "fts5", "syntax error",
                 "tsquery", "StoreUnavailableError")  # fmt: skip


@asynccontextmanager
async def _http(url: str, token: str) -> AsyncIterator[ClientSession]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


@pytest.fixture
def service(durable_url: str) -> Iterator[tuple[str, ContextStore]]:
    config = ServiceConfig(tokens=TOKENS, audit_refresh_seconds=0.2)
    with ContextStore.from_url(durable_url) as store, served(store, config) as url:
        yield url, store


def test_arguments_of_the_wrong_type_are_tool_errors_naming_them(service):
    url, store = service
    cid = str(_seed(store, "acme", "acme support"))
    wrong = [
        ("search", {"query": 5}, "query"),
        ("search", {"query": SECRET, "limit": "five"}, "limit"),
        ("search", {"query": SECRET, "limit": 10**6}, "limit"),
        ("search", {"query": SECRET, "context_ids": cid}, "context_ids"),
        ("search", {"query": SECRET, "since": "yesterday"}, "since"),
        ("search", {"query": "x" * 5000}, "query"),
        ("list_contexts", {"limit": 0}, "limit"),
        ("read_context", {"context_id": cid, "at_version": "latest"}, "at_version"),
        ("read_context", {"context_id": cid, "at_version": -1}, "at_version"),
        ("read_context", {"context_id": ["a"]}, "context_id"),
        ("read_context", {}, "context_id"),
        ("history", {"context_id": cid, "types": [1, 2]}, "types"),
        ("diff", {"context_id": cid, "from_version": 1}, "to_version"),
        ("list_calls", {"context_id": None}, "context_id"),
    ]

    async def agent() -> None:
        async with _http(url, "token-acme") as acme:
            for tool, args, named in wrong:
                answer = await acme.call_tool(tool, args)
                said = _said(answer)
                assert answer.is_error, (tool, args, said)
                assert named in said and "Traceback" not in said, (tool, args, said)

    asyncio.run(agent())
    assert store.visible(uuid.UUID(cid)).version == 3  # nothing written


def test_another_tenants_ids_answer_as_ids_that_exist_nowhere(service):
    url, store = service
    mine = _seed(store, "acme", "acme support")
    theirs = _seed(store, "globex", "globex support")
    nowhere = uuid.uuid4()
    calls = [
        ("read_context", {}),
        ("read_context", {"at_version": 1}),
        ("history", {}),
        ("diff", {"from_version": 1, "to_version": 2}),
        ("list_calls", {}),
    ]

    async def answers(session: ClientSession, cid: uuid.UUID) -> list[tuple[bool, str]]:
        found = []
        for tool, args in calls:
            answer = await session.call_tool(tool, {"context_id": str(cid), **args})
            found.append((bool(answer.is_error), _said(answer).replace(str(cid), "<id>")))
        hits = await session.call_tool("search", {"query": SECRET, "context_ids": [str(cid)]})
        found.append((bool(hits.is_error), json.dumps(hits.structured_content)))
        after = await session.call_tool("list_contexts", {"after": str(cid)})
        found.append((bool(after.is_error), _said(after).replace(str(cid), "<id>")))
        return found

    async def agent() -> None:
        async with _http(url, "token-acme") as acme:
            of_theirs, of_nowhere = await answers(acme, theirs), await answers(acme, nowhere)
            assert of_theirs == of_nowhere
            assert all(error for error, _ in of_theirs[: len(calls)])
            said = json.dumps(of_theirs)
            assert "globex" not in said and SECRET not in said
            own = await acme.call_tool("read_context", {"context_id": str(mine)})
            assert not own.is_error, _said(own)

    asyncio.run(agent())


def test_hostile_search_text_is_a_tool_error_or_an_answer(service):
    url, store = service
    _seed(store, "acme", 'NEAR("a" b) col:x ^y * 会议记录')

    async def agent() -> None:
        async with _http(url, "token-acme") as acme:
            for query in [q for q in HOSTILE if q != LONE] + [""]:  # (LONE: below)
                answer = await acme.call_tool("search", {"query": query})
                said = _said(answer)
                if answer.is_error:
                    assert "query" in said or "letters" in said, (query[:40], said)
                    assert not any(engine in said for engine in ENGINE_ERRORS), said
                else:
                    assert isinstance(answer.structured_content["hits"], list)

    asyncio.run(agent())
    # What the SDK's client cannot send, as raw JSON-RPC: a lone surrogate (escaped, as
    # JSON allows) and a 10 MB query.
    escaped = json.dumps(LONE)  # "\ud800 lone", ASCII
    for query in (escaped, json.dumps("x" * (10 * 1024 * 1024))):
        body = ('{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": '
                f'"search", "arguments": {{"query": {query}}}}}}}')  # fmt: skip
        r = httpx.post(f"{url}/mcp", content=body.encode(), timeout=60, headers={
            "Authorization": "Bearer token-acme", "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream"})  # fmt: skip
        assert r.status_code in (200, 400, 413), (r.status_code, r.text[:300])
        assert not any(engine in r.text for engine in ENGINE_ERRORS), r.text[:300]
        if r.status_code == 200:
            result = r.json()["result"]
            assert result.get("isError") or isinstance(result["structuredContent"]["hits"], list)


def test_hostile_search_text_over_http_is_an_answer_or_a_4xx(service):
    url, store = service
    _seed(store, "acme", "会议记录 acme")
    headers = {"Authorization": "Bearer token-acme"}
    for query in [*HOSTILE, "", "x" * 60_000]:  # (a client sends no longer a URL)
        r = httpx.get(f"{url}/v1/search", params={"q": query.encode("utf-8", "surrogatepass")},
                      headers=headers, timeout=60)  # fmt: skip
        assert r.status_code in (200, 400, 414, 422, 431), (query[:40], r.status_code, r.text)
        assert not any(engine in r.text for engine in ENGINE_ERRORS), r.text[:300]


# ---- writes offered at /mcp: the token's scope still decides -----------------------------


@pytest.fixture
def writable(tmp_path) -> Iterator[tuple[str, ContextStore]]:
    """The MCP server mounted at /mcp with writes offered (as `mount(..., allow_writes=
    True)` serves it), the service's tokens guarding it, on a loopback port."""
    import uvicorn

    from ctxstore.adapters.http.mcp_server import mount

    with (
        ContextStore.from_url(f"sqlite:///{tmp_path / 'w.db'}") as store,
        ThreadPoolExecutor(2) as pool,
    ):
        app = FastAPI()
        running = mount(app, Service(store, pool, Tokens(TOKENS)), allow_writes=True)
        app.router.lifespan_context = lambda _: running()
        port = free_port()
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                               log_level="warning"))  # fmt: skip
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        for _ in range(1000):
            if server.started:
                break
            time.sleep(0.02)
        try:
            yield f"http://127.0.0.1:{port}", store
        finally:
            server.should_exit = True
            thread.join(10)


def test_only_an_admin_token_of_the_tenant_erases_even_where_writes_are_offered(writable):
    url, store = writable
    cid = _seed(store, "acme", "acme support")
    args = {"context_id": str(cid), "reason": "asked to forget"}

    async def agent() -> None:
        for token in ("token-acme-reader", "token-acme-writer"):
            async with _http(url, token) as session:
                assert "erase" in {t.name for t in (await session.list_tools()).tools}
                refused = await session.call_tool("erase", args)
                assert refused.is_error and "needs admin" in _said(refused), _said(refused)
        async with _http(url, "token-globex-admin") as globex:
            elsewhere = await globex.call_tool("erase", args)
            assert elsewhere.is_error and f"no context with id {cid}" in _said(elsewhere)
        assert store.visible(cid).version == 3  # nothing erased
        async with _http(url, "token-acme-admin") as admin:
            done = await admin.call_tool("erase", args)
            assert not done.is_error, _said(done)

    asyncio.run(agent())
    assert [e.context_id for e in store.erasures()] == [cid]
    hello = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    for given in ({}, {"Authorization": "Bearer token-nobody"}):
        r = httpx.post(f"{url}/mcp", json=hello, timeout=30, headers={
            "Accept": "application/json, text/event-stream", **given})  # fmt: skip
        assert r.status_code == 401, r.text
