"""MCP for agents, driven by the official SDK's own client: `ctxstore mcp` over stdio (a
subprocess, as an agent's host starts it) and the service's /mcp over streamable HTTP,
where a token's tenant and scopes bound what its tools see."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import pytest
from fastapi.testclient import TestClient
from mcp.client import Client, ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import TextResourceContents
from typer.testing import CliRunner

from ctxstore.adapters.http import create_app
from ctxstore.adapters.http.auth import Caller, Tokens
from ctxstore.adapters.http.deps import Service
from ctxstore.adapters.settings import ServiceConfig, TokenGrant
from ctxstore.adapters.store.facade import ContextStore

from ..conftest import served

READS = {"search", "list_contexts", "read_context", "history", "diff", "list_calls"}
TOKENS = {
    "token-acme": "acme",
    "token-globex": "globex",
    "token-acme-writer": TokenGrant(tenant="acme", scopes=["write"]),
}
SECRET = "kumquat"  # a word both tenants' contexts hold


def _seed(store: ContextStore, tenant: str | None, name: str) -> uuid.UUID:
    cid = store.create(name=name, tenant=tenant)
    store.insert(cid, {"role": "user", "content": f"{name}: the {SECRET} order is late"})
    store.insert(cid, {"role": "assistant", "content": "It ships tomorrow."})
    return cid


def _said(result: Any) -> str:
    """The text of a tool's answer (its error, when it failed)."""
    return " ".join(block.text for block in result.content)


def _read(resource: Any) -> Any:
    """A resource's one text, as JSON."""
    (contents,) = resource.contents
    assert isinstance(contents, TextResourceContents)
    return json.loads(contents.text)


async def _names(session: Any) -> dict[str, Any]:
    return {tool.name: tool for tool in (await session.list_tools()).tools}


# ---- stdio: `ctxstore mcp`, as an agent's host starts it --------------------------------


@asynccontextmanager
async def _stdio(url: str, *flags: str) -> AsyncIterator[ClientSession]:
    command = ["-m", "ctxstore", "--url", url, "mcp", *flags]
    params = StdioServerParameters(command=sys.executable, args=command)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def test_stdio_serves_read_only_tools_a_resource_and_errors_as_tool_errors(tmp_path):
    url = f"sqlite:///{tmp_path / 'agents.db'}"
    with ContextStore.from_url(url) as store:
        cid = _seed(store, None, "support")
        other = _seed(store, None, "billing")
        history = [h.type for h in store.history(cid)]

    async def agent() -> None:
        async with _stdio(url) as session:
            tools = await _names(session)
            assert set(tools) == READS  # nothing that writes
            for tool in tools.values():
                assert tool.annotations.read_only_hint is True, tool.name
                assert tool.output_schema["type"] == "object"

            found = await session.call_tool("search", {"query": SECRET, "limit": 5})
            assert not found.is_error, _said(found)
            hits = found.structured_content["hits"]
            assert {h["context_id"] for h in hits} == {str(cid), str(other)}
            assert all(f"«{SECRET}»" in h["snippet"] for h in hits)
            only = await session.call_tool(
                "search", {"query": SECRET, "context_ids": [str(cid)], "roles": ["user"]}
            )
            assert [h["context_id"] for h in only.structured_content["hits"]] == [str(cid)]

            listed = await session.call_tool("list_contexts", {"search": "bill"})
            assert [c["name"] for c in listed.structured_content["contexts"]] == ["billing"]

            read = await session.call_tool("read_context", {"context_id": str(cid)})
            messages = read.structured_content["messages"]
            assert [m["role"] for m in messages] == ["user", "assistant"]
            assert json.loads(_said(read))["version"] == 3  # the same JSON, as text too
            past = await session.call_tool(
                "read_context", {"context_id": str(cid), "at_version": 2}
            )
            assert len(past.structured_content["messages"]) == 1

            events = await session.call_tool("history", {"context_id": str(cid)})
            assert [e["type"] for e in events.structured_content["entries"]] == history
            diff = await session.call_tool(
                "diff", {"context_id": str(cid), "from_version": 2, "to_version": 3}
            )
            assert [m["role"] for m in diff.structured_content["added"]] == ["assistant"]
            calls = await session.call_tool("list_calls", {"context_id": str(cid)})
            assert calls.structured_content == {"calls": []}

            (template,) = (await session.list_resource_templates()).resource_templates
            assert template.uri_template == "ctxstore://contexts/{context_id}"
            resource = await session.read_resource(f"ctxstore://contexts/{cid}")
            assert resource.contents[0].mime_type == "application/json"
            assert _read(resource)["messages"] == messages

            # What was wrong, in the store's words; never a traceback.
            unknown = str(uuid.uuid4())
            missing = await session.call_tool("read_context", {"context_id": unknown})
            assert missing.is_error and f"no context with id {unknown}" in _said(missing)
            bad = await session.call_tool("search", {"query": SECRET, "cursor": "nonsense"})
            assert bad.is_error and "cursor" in _said(bad)
            backwards = await session.call_tool(
                "diff", {"context_id": "not-a-uuid", "from_version": 1, "to_version": 2}
            )
            assert backwards.is_error and "not-a-uuid" in _said(backwards)
            for failed in (missing, bad, backwards):
                assert "Traceback" not in _said(failed)
            with pytest.raises(MCPError, match=unknown):
                await session.read_resource(f"ctxstore://contexts/{unknown}")

    asyncio.run(agent())


def test_stdio_offers_erase_only_with_allow_writes(tmp_path):
    url = f"sqlite:///{tmp_path / 'agents.db'}"
    with ContextStore.from_url(url) as store:
        cid = _seed(store, None, "support")

    async def agent() -> None:
        async with _stdio(url, "--allow-writes") as session:
            tools = await _names(session)
            assert set(tools) == READS | {"erase"}
            assert tools["erase"].annotations.destructive_hint is True
            assert tools["erase"].annotations.read_only_hint is False
            refused = await session.call_tool("erase", {"context_id": str(cid), "reason": ""})
            assert refused.is_error  # a reason is required
            erased = await session.call_tool(
                "erase", {"context_id": str(cid), "reason": "asked to forget"}
            )
            assert not erased.is_error, _said(erased)
            assert erased.structured_content["reason"] == "asked to forget"
            gone = await session.call_tool("read_context", {"context_id": str(cid)})
            assert gone.is_error and "no context" in _said(gone)

    asyncio.run(agent())
    with ContextStore.from_url(url) as store:
        assert [e.context_id for e in store.erasures()] == [cid]


def test_without_the_extra_the_command_says_which_to_install(monkeypatch, tmp_path):
    from ctxstore.adapters.cli.app import app

    _without_the_sdk(monkeypatch)
    done = CliRunner().invoke(app, ["--url", f"sqlite:///{tmp_path / 'x.db'}", "mcp"])
    assert done.exit_code == 8
    assert done.output.strip() == (
        "error: the MCP server needs the extra [mcp]: pip install './ctxstore[mcp]' "
        "(from the folder holding ctxstore's source)"
    )


def _without_the_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "mcp" or m.startswith("mcp.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.delitem(sys.modules, "ctxstore.adapters.http.mcp_server", raising=False)
    monkeypatch.setitem(sys.modules, "mcp", None)  # as if not installed


def test_without_the_extra_the_service_serves_the_api_alone(monkeypatch):
    _without_the_sdk(monkeypatch)
    store = ContextStore.from_url("memory://")
    with TestClient(create_app(store, ServiceConfig(), on_close=store.close)) as client:
        assert client.get("/health").status_code == 200
        assert client.post("/mcp", json={}).status_code == 404


# ---- the service's /mcp: a token's tenant and scopes ------------------------------------


@pytest.fixture
def service(durable_url: str) -> Iterator[tuple[str, ContextStore]]:
    config = ServiceConfig(tokens=TOKENS, audit_refresh_seconds=0.2)
    with ContextStore.from_url(durable_url) as store, served(store, config) as url:
        yield url, store


@asynccontextmanager
async def _http(url: str, token: str) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def test_a_tokens_tools_see_its_tenants_contexts_only(service):
    url, store = service
    mine = _seed(store, "acme", "acme support")
    theirs = _seed(store, "globex", "globex support")

    async def agent() -> None:
        async with _http(url, "token-acme") as acme:
            tools = await _names(acme)
            assert set(tools) == READS  # the service offers no writes
            assert all(t.annotations.read_only_hint for t in tools.values())

            found = await acme.call_tool("search", {"query": SECRET})
            assert [h["context_id"] for h in found.structured_content["hits"]] == [str(mine)]
            named = await acme.call_tool("search", {"query": SECRET, "context_ids": [str(theirs)]})
            assert named.structured_content["hits"] == []  # not even when named
            listed = await acme.call_tool("list_contexts", {})
            assert [c["context_id"] for c in listed.structured_content["contexts"]] == [str(mine)]

            read = await acme.call_tool("read_context", {"context_id": str(mine)})
            assert len(read.structured_content["messages"]) == 2
            for tool in ("read_context", "history", "list_calls"):
                other = await acme.call_tool(tool, {"context_id": str(theirs)})
                assert other.is_error and f"no context with id {theirs}" in _said(other)
            with pytest.raises(MCPError, match=str(theirs)):
                await acme.read_resource(f"ctxstore://contexts/{theirs}")
            resource = await acme.read_resource(f"ctxstore://contexts/{mine}")
            assert _read(resource)["context_id"] == str(mine)

        async with _http(url, "token-globex") as globex:
            found = await globex.call_tool("search", {"query": SECRET})
            assert [h["context_id"] for h in found.structured_content["hits"]] == [str(theirs)]

        async with _http(url, "token-acme-writer") as writer:  # no read scope
            refused = await writer.call_tool("search", {"query": SECRET})
            assert refused.is_error and "needs audit or read" in _said(refused)

    asyncio.run(agent())


def test_mcp_without_a_valid_token_is_401(service):
    url, _ = service
    hello = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    accept = {"Accept": "application/json, text/event-stream"}
    for given in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic x"}):
        r = httpx.post(f"{url}/mcp", json=hello, headers={**accept, **given}, timeout=30)
        assert r.status_code == 401, r.text
        assert r.headers["www-authenticate"].startswith("Bearer")
        assert r.json()["error"] == "NotAuthenticatedError"


def test_without_tokens_mcp_is_the_one_shared_space(tmp_path):
    with ContextStore.from_url(f"sqlite:///{tmp_path / 'open.db'}") as store:
        cid = _seed(store, None, "shared")
        with served(store, ServiceConfig(audit_refresh_seconds=0.2)) as url:

            async def agent() -> None:
                async with (
                    streamable_http_client(f"{url}/mcp") as (read, write),
                    ClientSession(read, write) as session,
                ):
                    await session.initialize()
                    found = await session.call_tool("read_context", {"context_id": str(cid)})
                    assert not found.is_error, _said(found)

            asyncio.run(agent())


def test_erase_needs_the_admin_scope(tmp_path):
    """The factory with writes, as a mount with them would serve it: a token's scopes
    decide (in memory, through the SDK's own client)."""
    with (
        ContextStore.from_url(f"sqlite:///{tmp_path / 's.db'}") as store,
        ThreadPoolExecutor(2) as pool,
    ):
        from ctxstore.adapters.http.mcp_server import mcp_server

        cid = _seed(store, "acme", "acme")
        reader = Caller("acme", None, scopes=frozenset({"read", "write", "audit"}))
        admin = Caller("acme", "ops", scopes=frozenset({"admin"}))
        globex = Caller("globex", None, scopes=frozenset({"admin"}))
        service = Service(store, pool, Tokens({}))
        args = {"context_id": str(cid), "reason": "asked"}

        async def erase(who: Caller) -> Any:
            async with Client(mcp_server(service, lambda _: who, allow_writes=True)) as client:
                return await client.call_tool("erase", args)

        refused = asyncio.run(erase(reader))
        assert refused.is_error and "needs admin" in _said(refused)
        elsewhere = asyncio.run(erase(globex))
        assert elsewhere.is_error and "no context" in _said(elsewhere)
        assert store.visible(cid).version == 3  # nothing erased
        done = asyncio.run(erase(admin))
        assert not done.is_error, _said(done)
        assert done.structured_content["actor"] == "acme:ops"
