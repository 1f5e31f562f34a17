"""The HTTP API: every operation of the facade, for SDKs in any language.

`create_app` only wires: the routers (adapters/http/routes/, one per resource), the request
guard, problem responses, the web view, the MCP server at /mcp (adapters/http/mcp_server.py)
and the audit refresher. Routes are thin: the `Owned` dependency gives the context the path
names, checked to be the caller's, and the route calls the store on the service's pool.
Commands answer the `Written` result with `ETag: "<version>"`; `If-Match` (or
`expected_version` in the body) makes a write conditional. The OpenAPI description is at
/openapi.json, and reads as pages at /docs (Swagger UI) and /redoc, whose scripts the
service serves itself (fastapi-offline ships them): no CDN is needed at run time.
"""

from __future__ import annotations

import pathlib
import threading
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, RedirectResponse
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles
from fastapi.telemetry import TelemetryConfig
from fastapi_offline import FastAPIOffline
from starlette.responses import Response as StarletteResponse
from starlette.types import Scope

from ctxstore.adapters.http import problems
from ctxstore.adapters.http.auth import Tokens
from ctxstore.adapters.http.deps import Served, Service, Unauthorized
from ctxstore.adapters.http.guard import RequestGuard
from ctxstore.adapters.http.openapi import document_headers
from ctxstore.adapters.http.routes import (
    audit,
    blobs,
    commands,
    contexts,
    events,
    reads,
    retention,
    search,
    streams,
    transfer,
)
from ctxstore.adapters.http.schemas import Health
from ctxstore.adapters.http.tail import TailHub
from ctxstore.adapters.settings import ServiceConfig, load_settings
from ctxstore.adapters.store.contract import OPERATIONS
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.adapters.store.shards.store import ShardedStore
from ctxstore.domain.errors import MissingExtraError

ROUTERS = (
    contexts.router, commands.router, streams.router, reads.router, transfer.router,
    audit.router, blobs.router, events.router, retention.router, search.router,
)  # fmt: skip
# The contract's operations by their routes: a route implementing one is named after it.
OPERATION_OF_ROUTE = {(op.method, op.path): name for name, op in OPERATIONS.items() if op.route}
NO_TELEMETRY: TelemetryConfig = {
    "tracing": False, "metrics": False, "logs": False, "operation_spans": False
}  # fmt: skip


def app_from_settings() -> FastAPI:
    """The service over the store CTXSTORE_URL names, or over the servers CTXSTORE_SHARDS
    names (uvicorn's factory: one per worker)."""
    settings = load_settings()
    store: Served = (
        ShardedStore.from_urls(settings.shards, settings) if settings.shards
        else ContextStore.from_url(settings=settings)
    )  # fmt: skip
    return create_app(store, on_close=store.close)


WEB = pathlib.Path(__file__).parent / "web"
# The web view runs only its own files and talks only to this service (its thumbnails are
# blob: URLs it makes of attachments read from here with the token).
WEB_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
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
    store: Served,
    config: ServiceConfig | None = None,
    *,
    on_close: Callable[[], None] | None = None,
    tail: TailHub | None = None,
) -> FastAPI:
    """The service over one store (closed by the caller, or by `on_close` at shutdown)."""
    config = config or store.settings.service
    keys = store.admin.idempotency_keys(
        config.idempotency_ttl_seconds, config.idempotency_pending_seconds
    )
    # Routes run on this pool: cheaper per request than the framework's own thread hop.
    pool = ThreadPoolExecutor(max_workers=config.threads, thread_name_prefix="ctxstore-http")
    service = Service(store, pool, Tokens(config.tokens, store.admin.stored_tokens))

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        store.tokenizers.counter(store.settings.encoding)  # loaded now, not on a request
        # Keep the audit and search indexes current, so their reads only read.
        stop = threading.Event()
        refresher = None
        if config.audit_refresh_seconds > 0:
            refresher = threading.Thread(
                target=_refresh_audit, args=(store, stop, config.audit_refresh_seconds),
                name="ctxstore-audit", daemon=True,
            )  # fmt: skip
            refresher.start()
        sweeper = None
        if config.sweep_seconds > 0 and store.admin.stored_tokens is not None:  # a database store
            sweeper = threading.Thread(
                target=_sweep, args=(store, stop, config.sweep_seconds),
                name="ctxstore-sweep", daemon=True,
            )  # fmt: skip
            sweeper.start()
        try:
            async with mcp_running():
                yield
        finally:
            stop.set()
            for thread in (refresher, sweeper):
                if thread is not None:
                    thread.join(timeout=10)
            pool.shutdown(wait=True)
            if on_close is not None:
                on_close()

    # The API's pages (/docs, /redoc) hold no data: open to all, like /openapi.json.
    app = FastAPIOffline(
        title="ctxstore",
        version="1",
        summary="Event-sourced store for LLM conversation context",
        description=(
            "Every change to a context is an event. Errors are application/problem+json. "
            "Authenticate with `Authorization: Bearer <token>` when the service has tokens."
        ),
        docs_url="/docs",
        redoc_url="/redoc",
        static_url="/docs/static",  # their scripts, styles and icon
        lifespan=lifespan,
        # Operation ids are the operations' names (insert, visible), as the contract and
        # the Python client name them, not FastAPI's path-derived ones.
        generate_unique_id_function=_operation_id,
        # FastAPI's own OpenTelemetry spans cost about a tenth of a request; opt in.
        telemetry=None if config.telemetry else NO_TELEMETRY,
    )
    app.state.service = service
    app.state.tokens = service.tokens
    app.state.tail = tail or TailHub(
        max_clients=config.tail_max_clients, send_timeout=config.tail_send_timeout
    )
    for router in ROUTERS:
        app.include_router(router)
    problems.install(app)
    document_headers(app)
    app.add_middleware(
        RequestGuard, max_body=config.max_body_bytes, tokens=service.tokens, keys=keys, pool=pool
    )
    app.mount("/ui", WebFiles(directory=WEB, html=True), name="ui")
    mcp_running = _mount_mcp(app, service)

    @app.get("/", include_in_schema=False)
    async def home() -> RedirectResponse:
        """The web view (its pages hold no data; they call /v1 with the caller's token)."""
        return RedirectResponse("/ui/")

    @app.get("/health", response_model=Health, tags=["service"])
    async def health() -> Health:
        """Liveness: answers without authentication."""
        return Health(status="ok", backend=store.url.split(":", 1)[0])

    @app.exception_handler(Unauthorized)
    async def unauthorized(request: Request, exc: Unauthorized) -> JSONResponse:
        return problems.problem(
            401, "unauthorized", str(exc), instance=request.url.path,
            headers={"WWW-Authenticate": 'Bearer realm="ctxstore"'},
        )  # fmt: skip

    return app


def _mount_mcp(app: FastAPI, service: Service) -> Callable[[], AbstractAsyncContextManager[Any]]:
    """The MCP server at /mcp, read-only, when the mcp extra is installed; what the lifespan
    runs for it."""
    try:
        from ctxstore.adapters.http.mcp_server import mount
    except MissingExtraError:  # without the extra the service serves the API alone
        return nullcontext
    return mount(app, service)


def _sweep(store: Served, stop: threading.Event, every: float) -> None:
    """Apply the retention policies now and then (each sweep is recorded when it finds
    policies; instances sharing a database may sweep the same context: erasing it twice
    finds it gone the second time)."""
    while not stop.wait(every):
        try:
            if store.admin.retention_policies():
                store.admin.sweep()
        except Exception:  # noqa: BLE001 - logged; the next sweep tries again
            if store.closed:  # closed under a service still running: nothing left to do
                return
            problems.log.warning("retention sweep failed", exc_info=True)


def _refresh_audit(store: Served, stop: threading.Event, every: float) -> None:
    while not stop.wait(every):
        try:
            store.admin.refresh_audit_index()
            store.admin.refresh_search_index()  # (after it: it reads what changed there)
        except Exception:  # noqa: BLE001 - the next audit read catches up and reports it
            if store.closed:
                return
            problems.log.warning("audit index refresh failed", exc_info=True)


def _operation_id(route: APIRoute) -> str:
    """A route's OpenAPI operation id: the name of the contract's operation it implements
    (spec.py), else its function's name (unique across the routes; a test checks it)."""
    for method in sorted(route.methods or ()):
        if (method, route.path) in OPERATION_OF_ROUTE:
            return OPERATION_OF_ROUTE[method, route.path]
    return route.name
