"""The HTTP API: every command and read of the facade, for SDKs in any language.

Routes are thin: they check who is calling and that the context is theirs, then call the
store. Commands answer the `Written` result with `ETag: "<version>"`; `If-Match` (or
`expected_version` in the body) makes a write conditional. The OpenAPI description is at
/openapi.json.
"""

from __future__ import annotations

import asyncio
import functools
import pathlib
import re
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Annotated, ParamSpec, TypeVar
from uuid import UUID

from fastapi import Depends, FastAPI, Path, Query, Request, Response
from fastapi.responses import JSONResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles
from fastapi.telemetry import TelemetryConfig
from starlette.responses import Response as StarletteResponse
from starlette.types import Scope

from ctxstore.adapters.http import problems
from ctxstore.adapters.http.auth import ACTOR_HEADER, Caller, NotAuthenticatedError, Tokens
from ctxstore.adapters.http.guard import RequestGuard
from ctxstore.adapters.http.openapi import document_headers
from ctxstore.adapters.http.schemas import (
    BatchEndBody,
    Command,
    CompactBody,
    CompressBody,
    CreateBody,
    Created,
    DeleteBody,
    ForkBody,
    Health,
    InsertBody,
    KeyBody,
    PromptBody,
    ReplaceBody,
    UsageBody,
)
from ctxstore.adapters.settings import ServiceConfig
from ctxstore.adapters.storage.codec.chain import Verification
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.adapters.store.results import Compaction, ContextSummary, Erasure, ModelCall, Written
from ctxstore.domain.errors import ContextNotFoundError, InvalidOperationError
from ctxstore.domain.prompt import Prompt
from ctxstore.projections.audit import AuditPage
from ctxstore.projections.changes import Diff
from ctxstore.projections.history import HistoryEntry
from ctxstore.projections.tokens import MAX_POINTS, TokenSeries
from ctxstore.projections.visible import BatchFrame, VisibleContext

API = "/v1"


async def caller(request: Request) -> Caller:
    """The tenant a request's bearer token names (401 without a valid one), the actor
    `X-Ctxstore-Actor` names, and the request's If-Match.

    Headers are read here rather than declared one by one: FastAPI's per-parameter work is
    most of a small request's cost. The OpenAPI description documents them (see openapi()).
    """
    tokens: Tokens = request.app.state.tokens
    headers = request.headers
    try:
        found = tokens.caller(headers.get("authorization"), headers.get(ACTOR_HEADER))
        return found.with_if_match(headers.get("if-match"))
    except NotAuthenticatedError as exc:
        raise Unauthorized(str(exc)) from None


# Module level: FastAPI resolves these annotations by name in the module's globals.
Who = Annotated[Caller, Depends(caller)]
ContextId = Annotated[str, Path(description="the context's UUID")]
NO_TELEMETRY: TelemetryConfig = {
    "tracing": False, "metrics": False, "logs": False, "operation_spans": False
}  # fmt: skip
P = ParamSpec("P")
R = TypeVar("R")
ETAG = re.compile(r'^\s*(?:W/)?"?(\d{1,18})"?\s*$')


def app_from_settings() -> FastAPI:
    """The service over the store CTXSTORE_URL names (uvicorn's factory: one per worker)."""
    store = ContextStore.from_url()
    return create_app(store, on_close=store.close)


WEB = pathlib.Path(__file__).parent / "web"
# The web view runs only its own files and talks only to this service.
WEB_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


class WebFiles(StaticFiles):
    """The web view's static files, with headers that confine what the page may do."""

    async def get_response(self, path: str, scope: Scope) -> StarletteResponse:
        response = await super().get_response(path, scope)
        response.headers.update(WEB_HEADERS)
        return response


def create_app(
    store: ContextStore,
    config: ServiceConfig | None = None,
    *,
    on_close: Callable[[], None] | None = None,
) -> FastAPI:
    """The service over one store (closed by the caller, or by `on_close` at shutdown)."""
    config = config or store.settings.service
    tokens = Tokens(config.tokens)
    keys = store.idempotency_keys(
        config.idempotency_ttl_seconds, config.idempotency_pending_seconds
    )

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        store.tokenizers.counter(store.settings.encoding)  # loaded now, not on a request
        # Keep the audit index current, so audit reads only read.
        stop = threading.Event()
        refresher = None
        if config.audit_refresh_seconds > 0:
            refresher = threading.Thread(
                target=_refresh_audit, args=(store, stop, config.audit_refresh_seconds),
                name="ctxstore-audit", daemon=True,
            )  # fmt: skip
            refresher.start()
        try:
            yield
        finally:
            stop.set()
            if refresher is not None:
                refresher.join(timeout=10)
            pool.shutdown(wait=True)
            if on_close is not None:
                on_close()

    app = FastAPI(
        title="ctxstore",
        version="1",
        summary="Event-sourced store for LLM conversation context",
        description=(
            "Every change to a context is an event. Errors are application/problem+json. "
            "Authenticate with `Authorization: Bearer <token>` when the service has tokens."
        ),
        docs_url=None,  # the interactive pages load scripts from a CDN; the JSON is enough
        redoc_url=None,
        lifespan=lifespan,
        # FastAPI's own OpenTelemetry spans cost about a tenth of a request; opt in.
        telemetry=None if config.telemetry else NO_TELEMETRY,
    )
    app.state.tokens = tokens
    # Routes run on this pool: cheaper per request than the framework's own thread hop.
    pool = ThreadPoolExecutor(max_workers=config.threads, thread_name_prefix="ctxstore-http")

    def pooled(fn: Callable[P, R]) -> Callable[P, Awaitable[R]]:
        """A blocking route as an async one that runs on the pool (FastAPI reads the
        signature of `fn` through functools.wraps)."""

        @functools.wraps(fn)
        async def run(*args: P.args, **kwargs: P.kwargs) -> R:
            call = functools.partial(fn, *args, **kwargs)
            return await asyncio.get_running_loop().run_in_executor(pool, call)

        return run

    problems.install(app)
    document_headers(app)
    app.add_middleware(
        RequestGuard, max_body=config.max_body_bytes, tokens=tokens, keys=keys, pool=pool
    )

    def owned(who: Caller, context_id: str) -> UUID:
        """The context's id if the caller may see it; else 404, as for one that does not exist."""
        cid = store.context_uuid(context_id)
        owner = store.tenant_of(cid)
        if who.tenant is not None and owner != who.tenant:
            raise ContextNotFoundError(f"no context with id {cid}")
        return cid

    def written(result: Written) -> Response:
        """The command's result, serialized once, with the context's new version as ETag."""
        return Response(
            result.model_dump_json(), media_type="application/json",
            headers={"ETag": f'"{result.version}"'},
        )  # fmt: skip

    # ---- service ------------------------------------------------------------------------

    app.mount("/ui", WebFiles(directory=WEB, html=True), name="ui")

    @app.get("/", include_in_schema=False)
    async def home() -> RedirectResponse:
        """The web view (its pages hold no data; they call /v1 with the caller's token)."""
        return RedirectResponse("/ui/")

    @app.get("/health", response_model=Health, tags=["service"])
    async def health() -> Health:
        """Liveness: answers without authentication."""
        return Health(status="ok", backend=store.url.split(":", 1)[0])

    # ---- contexts -----------------------------------------------------------------------

    @app.post(f"{API}/contexts", status_code=201, response_model=Created, tags=["contexts"])
    @pooled
    def create(body: CreateBody, who: Who, response: Response) -> Created:
        """Create an empty context."""
        cid = store.create(
            name=body.name, metadata=body.metadata, encoding=body.encoding, actor=who.actor,
            tenant=who.tenant, context_id=body.context_id,
        )  # fmt: skip
        response.headers["Location"] = f"{API}/contexts/{cid}"
        response.headers["ETag"] = '"1"'
        return Created(context_id=cid, version=1)

    @app.post(f"{API}/contexts/by-key", response_model=Created, tags=["contexts"])
    @pooled
    def context_for_key(body: KeyBody, who: Who) -> Created:
        """The context your own key names (e.g. a session id), created on first use."""
        cid = store.context_for_key(
            body.key, tenant=who.tenant, name=body.name, metadata=body.metadata,
            actor=who.actor,
        )  # fmt: skip
        return Created(context_id=cid, version=store.visible(cid).version)

    @app.get(f"{API}/contexts", response_model=list[ContextSummary], tags=["contexts"])
    @pooled
    def list_contexts(
        who: Who,
        search: Annotated[str | None, Query(max_length=200)] = None,
        limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
    ) -> list[ContextSummary]:
        """The caller's contexts in creation order; `search` matches name or id."""
        if who.tenant is None:
            return store.contexts(limit=limit, search=search)
        return store.contexts(limit=limit, tenant=who.tenant, search=search)

    @app.get(f"{API}/contexts/{{context_id}}", response_model=VisibleContext, tags=["reads"])
    @pooled
    def visible(
        context_id: ContextId,
        who: Who,
        response: Response,
        at_version: Annotated[int | None, Query(ge=1, le=2**62)] = None,
        at_time: Annotated[datetime | None, Query(description="ISO 8601 with a zone")] = None,
    ) -> VisibleContext:
        """The visible context now, at a version, or as it was at a time."""
        cid = owned(who, context_id)
        found = store.visible(cid, at_version=at_version, at_time=at_time)
        if at_version is None and at_time is None:
            response.headers["ETag"] = f'"{found.version}"'
        return found

    # ---- the six operations, and usage ----------------------------------------------------

    def expected(body: Command, if_match: str | None) -> int | None:
        if if_match is None or if_match.strip() == "*":
            return body.expected_version
        m = ETAG.match(if_match)
        if m is None:
            raise InvalidOperationError(f'If-Match must be "<version>", got {if_match!r:.40}')
        version = int(m.group(1))
        if body.expected_version is not None and body.expected_version != version:
            raise InvalidOperationError(
                f"If-Match says version {version}, expected_version says {body.expected_version}"
            )
        return version

    @app.post(f"{API}/contexts/{{context_id}}/insert", response_model=Written, tags=["commands"])
    @pooled
    def insert(
        context_id: ContextId,
        body: InsertBody,
        who: Who,
    ) -> Response:
        """Append messages, or place them after a visible message."""
        cid = owned(who, context_id)
        return written(store.insert(
            cid, body.messages, after=body.after, actor=who.actor,
            expected_version=expected(body, who.if_match),
        ))  # fmt: skip

    @app.post(f"{API}/contexts/{{context_id}}/delete", response_model=Written, tags=["commands"])
    @pooled
    def delete(
        context_id: ContextId,
        body: DeleteBody,
        who: Who,
    ) -> Response:
        """Hide visible messages (a tool call goes with its results)."""
        cid = owned(who, context_id)
        return written(store.delete(
            cid, body.ids, actor=who.actor, expected_version=expected(body, who.if_match)
        ))  # fmt: skip

    @app.post(f"{API}/contexts/{{context_id}}/replace", response_model=Written, tags=["commands"])
    @pooled
    def replace(
        context_id: ContextId,
        body: ReplaceBody,
        who: Who,
    ) -> Response:
        """Give a visible message new content under the same id."""
        cid = owned(who, context_id)
        return written(store.replace(
            cid, body.id, body.message, actor=who.actor,
            expected_version=expected(body, who.if_match),
        ))  # fmt: skip

    @app.post(f"{API}/contexts/{{context_id}}/compress", response_model=Written, tags=["commands"])
    @pooled
    def compress(
        context_id: ContextId,
        body: CompressBody,
        who: Who,
    ) -> Response:
        """Put one summary in place of a contiguous run of visible messages."""
        cid = owned(who, context_id)
        return written(store.compress(
            cid, body.ids, body.summary, stats=body.stats, actor=who.actor,
            expected_version=expected(body, who.if_match),
        ))  # fmt: skip

    @app.post(
        f"{API}/contexts/{{context_id}}/batch-start", response_model=Written, tags=["commands"]
    )
    @pooled
    def batch_start(
        context_id: ContextId,
        who: Who,
        body: Command | None = None,
    ) -> Response:
        """Open a batch: a point to roll back to."""
        cid = owned(who, context_id)
        return written(store.batch_start(
            cid, actor=who.actor, expected_version=expected(body or Command(), who.if_match)
        ))  # fmt: skip

    @app.post(f"{API}/contexts/{{context_id}}/batch-end", response_model=Written, tags=["commands"])
    @pooled
    def batch_end(
        context_id: ContextId,
        who: Who,
        body: BatchEndBody | None = None,
    ) -> Response:
        """Close batches: roll back to where the batch opened, unless keep."""
        cid = owned(who, context_id)
        body = body or BatchEndBody()
        return written(store.batch_end(
            cid, body.to, keep=body.keep, actor=who.actor,
            expected_version=expected(body, who.if_match),
        ))  # fmt: skip

    @app.post(f"{API}/contexts/{{context_id}}/usage", response_model=Written, tags=["commands"])
    @pooled
    def record_usage(context_id: ContextId, body: UsageBody, who: Who) -> Response:
        """Record what a provider billed for a call, and what was sent."""
        cid = owned(who, context_id)
        return written(store.record_usage(
            cid, model=body.model, prompt_tokens=body.prompt_tokens,
            completion_tokens=body.completion_tokens, version=body.version,
            counted_tokens=body.counted_tokens, sent=body.sent, actor=who.actor,
        ))  # fmt: skip

    # ---- reads ---------------------------------------------------------------------------

    @app.get(
        f"{API}/contexts/{{context_id}}/history",
        response_model=list[HistoryEntry],
        tags=["reads"],
    )
    @pooled
    def history(
        context_id: ContextId,
        who: Who,
        types: Annotated[list[str] | None, Query()] = None,
        actor: str | None = None,
        from_version: Annotated[int | None, Query(ge=1, le=2**62)] = None,
        to_version: Annotated[int | None, Query(ge=1, le=2**62)] = None,
        changes: bool = False,
    ) -> list[HistoryEntry]:
        """Every event of the context, with what rollbacks reverted (and what each changed)."""
        cid = owned(who, context_id)
        return store.history(
            cid, types=types, actor=actor, from_version=from_version, to_version=to_version,
            changes=changes,
        )  # fmt: skip

    @app.get(
        f"{API}/contexts/{{context_id}}/batches", response_model=list[BatchFrame], tags=["reads"]
    )
    @pooled
    def batches(context_id: ContextId, who: Who) -> list[BatchFrame]:
        """The open batches, lowest first."""
        return store.batches(owned(who, context_id))

    @app.get(f"{API}/contexts/{{context_id}}/diff", response_model=Diff, tags=["reads"])
    @pooled
    def diff(
        context_id: ContextId,
        who: Who,
        from_version: Annotated[int, Query(ge=1, le=2**62)],
        to_version: Annotated[int, Query(ge=1, le=2**62)],
    ) -> Diff:
        """Messages added, removed and changed between two versions."""
        return store.diff(owned(who, context_id), from_version, to_version)

    @app.get(f"{API}/contexts/{{context_id}}/tokens", response_model=TokenSeries, tags=["reads"])
    @pooled
    def token_series(
        context_id: ContextId,
        who: Who,
        points: Annotated[int, Query(ge=2, le=MAX_POINTS)] = 500,
    ) -> TokenSeries:
        """Visible tokens over the versions (thinned), compactions and rollbacks marked."""
        return store.token_series(owned(who, context_id), points=points)

    @app.get(f"{API}/contexts/{{context_id}}/calls", response_model=list[ModelCall], tags=["reads"])
    @pooled
    def calls(context_id: ContextId, who: Who) -> list[ModelCall]:
        """Recorded model calls, each with exactly the messages sent."""
        return store.calls(owned(who, context_id))

    @app.get(f"{API}/contexts/{{context_id}}/verify", response_model=Verification, tags=["reads"])
    @pooled
    def verify(context_id: ContextId, who: Who) -> Verification:
        """Check the context's hash chain."""
        return store.verify(owned(who, context_id))

    @app.delete(f"{API}/contexts/{{context_id}}", response_model=Erasure, tags=["contexts"])
    @pooled
    def erase(
        context_id: ContextId,
        who: Who,
        reason: Annotated[str, Query(min_length=1, max_length=1000)],
    ) -> Erasure:
        """Erase the context's contents for good (right to be forgotten); a record stays."""
        return store.erase(owned(who, context_id), reason=reason, actor=who.actor)

    @app.get(f"{API}/audit", response_model=AuditPage, tags=["reads"])
    @pooled
    def audit(
        who: Who,
        since: Annotated[datetime | None, Query(description="ISO 8601 with a zone")] = None,
        until: Annotated[datetime | None, Query(description="ISO 8601 with a zone")] = None,
        types: Annotated[list[str] | None, Query()] = None,
        actor: str | None = None,
        context_id: str | None = None,
        after: Annotated[int, Query(ge=0, le=2**62)] = 0,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
        from_version: Annotated[int | None, Query(ge=1, le=2**62)] = None,
        to_version: Annotated[int | None, Query(ge=1, le=2**62)] = None,
    ) -> AuditPage:
        """Events across the caller's contexts, in the order recorded; page with `after`.
        With `context_id`, `from_version`/`to_version` read a window of its versions."""
        cid = None if context_id is None else owned(who, context_id)
        return store.audit(
            since=since, until=until, types=types, actor=actor, context_id=cid,
            tenant=who.tenant, after=after, limit=limit,
            from_version=from_version, to_version=to_version,
        )  # fmt: skip

    # ---- derived: fork, prompt, compaction -----------------------------------------------

    @app.post(
        f"{API}/contexts/{{context_id}}/fork",
        status_code=201,
        response_model=Created,
        tags=["commands"],
    )
    @pooled
    def fork(context_id: ContextId, body: ForkBody, who: Who, response: Response) -> Created:
        """A new context starting as a copy of this one's visible context (at a version)."""
        cid = owned(who, context_id)
        new = store.fork(
            cid, at_version=body.at_version, name=body.name, metadata=body.metadata,
            actor=who.actor,
        )  # fmt: skip
        response.headers["Location"] = f"{API}/contexts/{new}"
        return Created(context_id=new, version=store.visible(new).version)

    @app.post(f"{API}/contexts/{{context_id}}/prompt", response_model=Prompt, tags=["reads"])
    @pooled
    def build_prompt(context_id: ContextId, body: PromptBody, who: Who) -> Prompt:
        """What to send under a token budget, and what was left out and why."""
        cid = owned(who, context_id)
        return store.build_prompt(
            cid, body.budget, body.strategy, query=body.query, resources=body.resources,
            safety=body.safety, at_version=body.at_version,
        )  # fmt: skip

    @app.post(
        f"{API}/contexts/{{context_id}}/compact", response_model=Compaction, tags=["commands"]
    )
    @pooled
    def compact(context_id: ContextId, who: Who, body: CompactBody | None = None) -> Compaction:
        """Summarize the older half of the rounds since the latest summary."""
        cid = owned(who, context_id)
        body = body or CompactBody()
        return store.compact(cid, dry_run=body.dry_run, in_batch=body.in_batch, actor=who.actor)

    @app.exception_handler(Unauthorized)
    async def unauthorized(request: Request, exc: Unauthorized) -> JSONResponse:
        return problems.problem(
            401, "unauthorized", str(exc), instance=request.url.path,
            headers={"WWW-Authenticate": 'Bearer realm="ctxstore"'},
        )  # fmt: skip

    return app


class Unauthorized(Exception):
    """Raised by the caller dependency; answered 401 with a Bearer challenge."""


def _refresh_audit(store: ContextStore, stop: threading.Event, every: float) -> None:
    while not stop.wait(every):
        try:
            store.refresh_audit_index()
        except Exception:  # noqa: BLE001 - the next audit read catches up and reports it
            problems.log.warning("audit index refresh failed", exc_info=True)
