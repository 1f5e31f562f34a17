"""Errors as RFC 9457 problem details (application/problem+json).

Every error ctxstore raises on purpose is the client's doing and answers a precise 4xx;
only a fault of the service itself answers 5xx. `error` names the facade's exception class,
so a client can raise the same typed error the in-process store would.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ctxstore.adapters.http.scopes import ForbiddenError
from ctxstore.domain.errors import (
    BlobNotFoundError,
    BlobTooLargeError,
    ContextExistsError,
    ContextNotFoundError,
    CtxStoreError,
    DamagedContextError,
    HistoryRemovedError,
    InvalidMessageError,
    LimitExceededError,
    MalformedTranscriptError,
    NothingToSummarizeError,
    PromptDoesNotFitError,
    RetentionConfirmationError,
    StoreUnavailableError,
    TooManyClientsError,
    UnknownBatchError,
    UnknownMessageError,
    VersionConflictError,
)

log = logging.getLogger(__name__)
MEDIA_TYPE = "application/problem+json"

# Most specific first: ContextExistsError is also an InvalidOperationError.
STATUS: list[tuple[type[CtxStoreError], int, str]] = [
    (ForbiddenError, 403, "forbidden"),
    (HistoryRemovedError, 410, "history-removed"),
    (ContextNotFoundError, 404, "context-not-found"),
    (UnknownMessageError, 404, "message-not-found"),
    (BlobNotFoundError, 404, "blob-not-found"),
    (ContextExistsError, 409, "context-exists"),
    (RetentionConfirmationError, 409, "confirmation-required"),
    (VersionConflictError, 409, "version-conflict"),
    (InvalidMessageError, 422, "invalid-message"),
    (MalformedTranscriptError, 422, "malformed-transcript"),
    (UnknownBatchError, 422, "unknown-batch"),
    (PromptDoesNotFitError, 422, "prompt-does-not-fit"),
    (BlobTooLargeError, 413, "too-large"),
    (LimitExceededError, 422, "limit-exceeded"),
    (NothingToSummarizeError, 422, "nothing-to-summarize"),
    (TooManyClientsError, 503, "too-many-tail-clients"),
    (StoreUnavailableError, 503, "store-unavailable"),
    (DamagedContextError, 500, "damaged-context"),
]
TITLES = {
    400: "Bad request",
    401: "Unauthorized",
    403: "Forbidden",
    410: "Gone",
    404: "Not found",
    405: "Method not allowed",
    409: "Conflict",
    413: "Request too large",
    415: "Unsupported media type",
    422: "Unprocessable request",
    500: "Internal server error",
    503: "Service unavailable",
}


# `error` of a problem the service answers before any store operation runs: the class a
# client raises where it has one (a request too large is a limit exceeded, a malformed one
# an invalid operation), else the name of what the service refused (a missing token).
ERROR_OF_STATUS = {
    400: "InvalidOperationError", 401: "NotAuthenticatedError", 405: "InvalidOperationError",
    409: "InvalidOperationError", 413: "LimitExceededError", 415: "InvalidOperationError",
    422: "InvalidOperationError",
}  # fmt: skip


def problem(
    status: int,
    slug: str,
    detail: str,
    *,
    instance: str | None = None,
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> JSONResponse:
    body: dict[str, Any] = {
        "type": f"/problems/{slug}",
        "title": TITLES.get(status, "Error"),
        "status": status,
        "detail": detail,
    }
    if instance is not None:
        body["instance"] = instance
    if status in ERROR_OF_STATUS:
        body["error"] = ERROR_OF_STATUS[status]
    body.update(extra)
    return JSONResponse(body, status_code=status, media_type=MEDIA_TYPE, headers=headers)


def for_error(exc: CtxStoreError, instance: str | None = None) -> JSONResponse:
    """The problem response of an error the store raised."""
    # InvalidOperationError and the rest: well-formed JSON that makes no sense here.
    status, slug = next(
        ((s, g) for c, s, g in STATUS if isinstance(exc, c)), (422, "invalid-operation")
    )
    # A database outage passes: a client may try again shortly.
    headers = {"Retry-After": "1"} if status == 503 else None
    extra = {}
    if isinstance(exc, RetentionConfirmationError):  # what the policy would remove
        extra["plan"] = exc.plan.model_dump(mode="json")
    return problem(
        status, slug, str(exc), instance=instance, headers=headers, error=type(exc).__name__,
        **extra,
    )  # fmt: skip


async def json_error(request: Request, error: Any) -> dict[str, Any]:
    """A body that is not JSON, said as where it breaks (the framework puts the character
    offset where a field path goes)."""
    loc = list(error.get("loc", ()))
    offset = loc[1] if len(loc) > 1 and isinstance(loc[1], int) else None
    why = str((error.get("ctx") or {}).get("error") or "not JSON")
    if offset is not None:
        before = (await request.body())[:offset].decode("utf-8", "replace")
        line, column = before.count("\n") + 1, len(before) - before.rfind("\n")
        why += f" at line {line}, column {column} (character {offset})"
    return {"loc": ["body"], "msg": f"not valid JSON: {why}", "type": "json_invalid"}


def install(app: FastAPI) -> None:
    """Answer every error, the framework's too, as problem+json."""

    @app.exception_handler(CtxStoreError)
    async def store_error(request: Request, exc: CtxStoreError) -> JSONResponse:
        return for_error(exc, request.url.path)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            await json_error(request, e) if e.get("type") == "json_invalid" else
            {"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")), "type": e.get("type")}
            for e in exc.errors()
        ]  # fmt: skip
        where = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in errors[:5])
        # `error`: the class the in-process store raises for a value it refuses, so that
        # the client raises what the store would (a version 0, a limit out of range).
        return problem(
            422, "invalid-request", f"the request is not valid: {where}",
            instance=request.url.path, errors=errors, error="InvalidOperationError",
        )  # fmt: skip

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        slug = {401: "unauthorized", 404: "not-found", 405: "method-not-allowed"}.get(
            exc.status_code, "http-error"
        )
        return problem(
            exc.status_code, slug, str(exc.detail), instance=request.url.path,
            headers=dict(exc.headers or {}),
        )  # fmt: skip

    @app.exception_handler(Exception)
    async def fault(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        return problem(
            500, "internal-error", "the service failed; the error is in its log",
            instance=request.url.path,
        )  # fmt: skip
