"""What every route depends on: the service (store and worker pool), the caller, the context
the path names (checked to be the caller's), and how a blocking route runs off the loop."""

from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Annotated, Any, ParamSpec, TypeVar
from uuid import UUID

from fastapi import Depends, Path, Request, Response

from ctxstore.adapters.http import scopes
from ctxstore.adapters.http.auth import ACTOR_HEADER, Caller, NotAuthenticatedError, Tokens
from ctxstore.adapters.http.schemas import Command
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.adapters.store.results import Written
from ctxstore.adapters.store.shards.store import ShardedStore
from ctxstore.domain.errors import ContextNotFoundError, InvalidOperationError
from ctxstore.domain.limits import tenant_scoped_id

API = "/v1"
Served = ContextStore | ShardedStore  # what a service serves: one store, or one over shards
ETAG = re.compile(r'^\s*(?:W/)?"?(\d{1,18})"?\s*$')
P = ParamSpec("P")
R = TypeVar("R")


class Unauthorized(Exception):
    """Raised by the caller dependency; answered 401 with a Bearer challenge."""


@dataclass(frozen=True)
class Service:
    """One app's store, the pool its routes run on, and its tokens."""

    store: Served
    pool: ThreadPoolExecutor
    tokens: Tokens


async def service(request: Request) -> Service:
    found: Service = request.app.state.service
    return found


Svc = Annotated[Service, Depends(service)]


async def caller(request: Request) -> Caller:
    """The tenant a request's bearer token names (401 without a valid one), the actor
    `X-Ctxstore-Actor` names, and the request's If-Match.

    Headers are read here rather than declared one by one: FastAPI's per-parameter work is
    most of a small request's cost. The OpenAPI description documents them (openapi.py).
    """
    headers = request.headers
    try:
        found: Caller = request.app.state.service.tokens.caller(
            headers.get("authorization"), headers.get(ACTOR_HEADER)
        )
    except NotAuthenticatedError as exc:
        raise Unauthorized(str(exc)) from None
    route = request.scope.get("route")
    scopes.check(found.scopes, request.method, getattr(route, "path", request.url.path))
    return found.with_if_match(headers.get("if-match"))


Who = Annotated[Caller, Depends(caller)]
ContextId = Annotated[str, Path(description="the context's UUID")]


@dataclass
class Target:
    """The context a path names, for a caller; `cid` checks, on the pool, that the caller
    may see it (else 404, as for one that does not exist)."""

    svc: Service
    context_id: str
    who: Caller
    _checked: UUID | None = field(default=None, repr=False)

    @property
    def store(self) -> Served:
        return self.svc.store

    @property
    def pool(self) -> ThreadPoolExecutor:
        return self.svc.pool

    @property
    def cid(self) -> UUID:
        if self._checked is None:
            cid = self.store.context_uuid(self.context_id)
            tenant = self.who.tenant
            if tenant is None:
                self.store.hooks.tenant_of(cid)  # raises ContextNotFoundError
            elif not self._owns(cid):
                # An id the tenant chose names the context created under it (see create).
                scoped = tenant_scoped_id(tenant, cid)
                if not self._owns(scoped):
                    raise ContextNotFoundError(f"no context with id {cid}")
                cid = scoped
            self._checked = cid
        return self._checked

    def _owns(self, cid: UUID) -> bool:
        try:
            return self.store.hooks.tenant_of(cid) == self.who.tenant
        except ContextNotFoundError:
            return False

    def owned(self, context_id: str | None) -> UUID | None:
        """Another context the request names (a query parameter), checked the same way."""
        if context_id is None:
            return None
        return Target(self.svc, context_id, self.who).cid


async def target(context_id: ContextId, who: Who, svc: Svc) -> Target:
    return Target(svc, context_id, who)


async def caller_target(who: Who, svc: Svc) -> Target:
    """For routes that name no context in their path: the caller and the service."""
    return Target(svc, "", who)


Owned = Annotated[Target, Depends(target)]
Requester = Annotated[Target, Depends(caller_target)]


def pooled(fn: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """A blocking route as an async one that runs on the service's pool (FastAPI reads the
    signature of `fn` through functools.wraps); the route takes a Target as `ctx`."""

    @functools.wraps(fn)
    async def run(*args: P.args, **kwargs: P.kwargs) -> R:
        holder: Any = kwargs["ctx"]
        call = functools.partial(fn, *args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(holder.pool, call)

    return run


def written(result: Written) -> Response:
    """A command's result, serialized once, with the context's new version as ETag."""
    return Response(
        result.model_dump_json(), media_type="application/json",
        headers={"ETag": f'"{result.version}"'},
    )  # fmt: skip


def expected(body: Command | None, if_match: str | None) -> int | None:
    """The version a write is conditional on: If-Match, or the body's expected_version."""
    stated = None if body is None else body.expected_version
    if if_match is None or if_match.strip() == "*":
        return stated
    m = ETAG.match(if_match)
    if m is None:
        raise InvalidOperationError(f'If-Match must be "<version>", got {if_match!r:.40}')
    version = int(m.group(1))
    if stated is not None and stated != version:
        raise InvalidOperationError(
            f"If-Match says version {version}, expected_version says {stated}"
        )
    return version
