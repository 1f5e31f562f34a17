"""The Model Context Protocol server (`pip install 'ctxstore[mcp]'`): the store's reads as
tools an agent calls, on stdio (`ctxstore mcp`) or at the service's /mcp (streamable HTTP).

Every tool only reads, and says so (`readOnlyHint`); a server made with `allow_writes`
also lists `erase` (`destructiveHint`). A tool acts as the caller its request names: on
stdio the command line's user (every context, every scope); at /mcp the bearer token's
tenant and scopes (read or audit to read, admin to erase), another tenant's context
answering as one that does not exist, exactly as the HTTP API's routes do. Results are
the store's own models as JSON; a CtxStoreError is a tool error carrying its message.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import datetime
from importlib.metadata import PackageNotFoundError, version
from typing import Annotated, Any, TypeVar

from fastapi import FastAPI
from pydantic import BaseModel, Field
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from ctxstore.adapters.http import problems
from ctxstore.adapters.http.auth import ACTOR_HEADER, Caller, NotAuthenticatedError
from ctxstore.adapters.http.deps import Service, Target
from ctxstore.adapters.http.scopes import ADMIN, READ, ForbiddenError
from ctxstore.domain.errors import (
    ContextNotFoundError,
    CtxStoreError,
    MissingExtraError,
    first_line,
)

try:
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
    from mcp.server.transport_security import TransportSecuritySettings
    from mcp_types import ToolAnnotations
except ModuleNotFoundError as exc:  # the extra is not installed: say which
    raise MissingExtraError("the MCP server", "mcp") from exc

T = TypeVar("T")
CallerOf = Callable[[Request | None], Caller]  # the caller of a message's HTTP request
CALLER = "ctxstore.caller"  # where /mcp leaves the authenticated caller in the request
CHALLENGE = {"WWW-Authenticate": 'Bearer realm="ctxstore"'}  # as the API's 401 says
READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)
DESTRUCTIVE = ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False)
CONTEXT_URI = "ctxstore://contexts/{context_id}"
INSTRUCTIONS = (
    "ctxstore keeps LLM conversations (contexts) as events. Find messages with `search`, "
    "list contexts with `list_contexts`, then read one with `read_context`; `history`, "
    "`diff` and `list_calls` say how it changed and what models were sent."
)

# The tools' arguments, as their input schemas describe them.
ContextId = Annotated[str, Field(description="the context's id (a UUID)")]
Version = Annotated[int, Field(ge=1, le=2**62)]
Query = Annotated[
    str,
    Field(min_length=1, max_length=1000, description='words (all must match) and "quoted phrases"'),
]
Names = Annotated[list[str] | None, Field(max_length=100)]
Moment = Annotated[datetime | None, Field(description="ISO 8601 with a zone")]
Hidden = Annotated[
    bool, Field(description="also deleted, replaced, compressed and rolled back messages")
]
Cursor = Annotated[str | None, Field(max_length=4000, description="the previous page's cursor")]
Forks = Annotated[
    bool | None, Field(description="its forks hold copies: true erases them too, false keeps them")
]


def mcp_server(service: Service, caller_of: CallerOf, allow_writes: bool = False) -> MCPServer:
    """The MCP server over a service's store; `caller_of` names who each request acts as."""
    tools = _Tools(service, caller_of)
    server: MCPServer = MCPServer(
        "ctxstore", version=_version(), instructions=INSTRUCTIONS,
        log_level="WARNING",  # (the SDK configures the root logger: keep it quiet)
    )  # fmt: skip
    reads = (tools.search, tools.list_contexts, tools.read_context, tools.history, tools.diff)
    for read in (*reads, tools.list_calls):
        server.add_tool(read, annotations=READ_ONLY)
    if allow_writes:
        server.add_tool(tools.erase, annotations=DESTRUCTIVE)
    server.resource(
        CONTEXT_URI, name="context", mime_type="application/json",
        description="A context's visible messages, as read_context returns them.",
    )(tools.context_resource)  # fmt: skip
    return server


def mount(
    app: FastAPI, service: Service, *, allow_writes: bool = False
) -> Callable[[], AbstractAsyncContextManager[None]]:
    """Serve the MCP server at /mcp on `app`; returns what the app's lifespan must run."""
    server = mcp_server(service, _caller_of_request, allow_writes)

    @asynccontextmanager
    async def running() -> AsyncIterator[None]:
        # Stateless, answering JSON: any worker serves any request (no session to find),
        # and no tool needs a stream back. A fresh manager each run (one runs only once).
        server.streamable_http_app(
            stateless_http=True, json_response=True,
            # As the API's routes: no Host check (a token guards them; without tokens
            # `ctxstore serve` keeps to loopback).
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )  # fmt: skip
        async with server.session_manager.run():
            yield

    app.router.routes.append(
        Route("/mcp", _Authenticated(service, server), include_in_schema=False)
    )
    return running


class _Authenticated:
    """/mcp: the bearer token's caller, left in the request for the tools (401 without a
    valid token when the service has tokens), then the MCP server's transport. (An ASGI
    app, not a function: a function is a GET endpoint to Starlette.)"""

    def __init__(self, service: Service, server: MCPServer) -> None:
        self.tokens = service.tokens
        self.server = server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = Headers(scope=scope)
        try:
            who = self.tokens.caller(headers.get("authorization"), headers.get(ACTOR_HEADER))
        except NotAuthenticatedError as exc:
            refused = problems.problem(
                401, "unauthorized", str(exc), instance=scope["path"], headers=CHALLENGE
            )
        except CtxStoreError as exc:  # a bad actor header
            refused = problems.for_error(exc, scope["path"])
        else:
            transport = self.server.session_manager
            await transport.handle_request({**scope, CALLER: who}, receive, send)
            return
        await refused(scope, receive, send)


def _caller_of_request(request: Request | None) -> Caller:
    found = None if request is None else request.scope.get(CALLER)
    if not isinstance(found, Caller):  # never reached unauthenticated: refuse, to be sure
        raise NotAuthenticatedError("a bearer token is required (Authorization: Bearer ...)")
    return found


def _version() -> str:
    try:
        return version("ctxstore")
    except PackageNotFoundError:  # a checkout never installed
        return "0"


class _Tools:
    """The tools and the resource; each reads as the request's caller, on the service's pool."""

    def __init__(self, service: Service, caller_of: CallerOf) -> None:
        self._service = service
        self._caller_of = caller_of

    async def _call(
        self,
        ctx: Context,
        admits: frozenset[str],
        name: str,
        fn: Callable[[Target], T],
        context_id: str = "",
    ) -> T:
        """`fn` on the pool, given the caller (checked to hold a scope `admits`) and the
        context it names (`cid`: checked to be one the caller may see, as a route's is);
        raises CtxStoreError."""
        who = self._caller_of(ctx.request_context.request)
        if not who.scopes & admits:
            wanted = " or ".join(sorted(admits))
            raise ForbiddenError(f"this token may not use {name}: it needs {wanted}")
        target = Target(self._service, context_id, who)
        return await asyncio.get_running_loop().run_in_executor(self._service.pool, fn, target)

    async def _tool(
        self,
        ctx: Context,
        admits: frozenset[str],
        name: str,
        fn: Callable[[Target], Any],
        context_id: str = "",
    ) -> dict[str, Any]:
        """A tool's answer: the result as JSON, or a tool error saying what was wrong."""
        try:
            found = await self._call(ctx, admits, name, fn, context_id)
        except CtxStoreError as exc:
            raise ToolError(first_line(exc) or type(exc).__name__) from None
        return dict(_json(found))

    async def search(
        self,
        ctx: Context,
        query: Query,
        context_ids: Annotated[Names, Field(description="only these contexts")] = None,
        roles: Annotated[Names, Field(description="only messages of these roles")] = None,
        since: Moment = None,
        until: Moment = None,
        include_hidden: Hidden = False,
        limit: Annotated[int, Field(ge=1, le=100)] = 20,
        cursor: Cursor = None,
    ) -> dict[str, Any]:
        """Find messages across conversations, best first: each hit names its context,
        message and role, with a snippet marking the match «like this». Pass `cursor`
        back for the next page."""
        return await self._tool(ctx, READ, "search", lambda t: t.store.search(
            query, tenant=t.who.tenant, context_ids=context_ids, roles=roles, since=since,
            until=until, include_hidden=include_hidden, limit=limit, cursor=cursor,
        ))  # fmt: skip

    async def list_contexts(
        self,
        ctx: Context,
        search: Annotated[
            str | None, Field(max_length=200, description="in the name or id")
        ] = None,
        limit: Annotated[int, Field(ge=1, le=1000)] = 100,
        after: Annotated[str | None, Field(description="the last id of the page before")] = None,
    ) -> dict[str, Any]:
        """The contexts (conversations) in the order they were created: id, name, metadata."""
        return await self._tool(ctx, READ, "list_contexts", lambda t: {
            "contexts": t.store.contexts(
                limit=limit, tenant=t.who.tenant, search=search, after=after
            )
        })  # fmt: skip

    async def read_context(
        self, ctx: Context, context_id: ContextId, at_version: Version | None = None
    ) -> dict[str, Any]:
        """A context's visible messages (what a model would be sent), now or at a version."""
        return await self._tool(
            ctx, READ, "read_context",
            lambda t: t.store.visible(t.cid, at_version=at_version), context_id,
        )  # fmt: skip

    async def history(
        self,
        ctx: Context,
        context_id: ContextId,
        from_version: Version | None = None,
        to_version: Version | None = None,
        types: Annotated[Names, Field(description="only events of these types")] = None,
        changes: Annotated[bool, Field(description="say what each event changed")] = False,
    ) -> dict[str, Any]:
        """Every event of a context in order (inserts, deletes, compactions, rollbacks...),
        with what rollbacks reverted."""
        return await self._tool(ctx, READ, "history", lambda t: {
            "entries": t.store.history(
                t.cid, types=types, from_version=from_version, to_version=to_version,
                changes=changes,
            )
        }, context_id)  # fmt: skip

    async def diff(
        self, ctx: Context, context_id: ContextId, from_version: Version, to_version: Version
    ) -> dict[str, Any]:
        """Messages added, removed and changed between two versions of a context."""
        return await self._tool(
            ctx, READ, "diff", lambda t: t.store.diff(t.cid, from_version, to_version), context_id
        )

    async def list_calls(self, ctx: Context, context_id: ContextId) -> dict[str, Any]:
        """The model calls recorded on a context, in order (numbered from 1): what each
        sent, its reply and usage."""
        return await self._tool(
            ctx, READ, "list_calls", lambda t: {"calls": t.store.calls(t.cid)}, context_id
        )

    async def erase(
        self,
        ctx: Context,
        context_id: ContextId,
        reason: Annotated[str, Field(min_length=1, max_length=1000)],
        with_forks: Forks = None,
    ) -> dict[str, Any]:
        """Erase a context's contents for good (a record of the erasure stays). Cannot be
        undone."""
        return await self._tool(ctx, ADMIN, "erase", lambda t: t.store.erase(
            t.cid, reason=reason, actor=t.who.actor, with_forks=with_forks,
        ), context_id)  # fmt: skip

    async def context_resource(self, context_id: str, ctx: Context) -> str:
        """The resource ctxstore://contexts/{context_id}: its visible messages as JSON."""
        try:
            seen = await self._call(
                ctx, READ, "contexts", lambda t: t.store.visible(t.cid), context_id
            )
        except ContextNotFoundError as exc:
            raise ResourceNotFoundError(first_line(exc)) from None
        except CtxStoreError as exc:
            raise ResourceError(first_line(exc) or type(exc).__name__) from None
        return seen.model_dump_json()


def _json(value: Any) -> Any:
    """A result as JSON values (the models' own dumps, inside any dict or list)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, dict):
        return {k: _json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json(v) for v in value]
    return value
