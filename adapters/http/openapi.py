"""What the OpenAPI description says beyond the routes' own parameters: the bearer scheme,
the headers the service reads itself (Authorization, X-Ctxstore-Actor, If-Match,
Idempotency-Key), so that generated clients send them, and every problem+json response
the service answers (in place of FastAPI's validation shape, which it never sends)."""

from __future__ import annotations

import inspect
from typing import Any

from fastapi import FastAPI

from ctxstore.adapters.http import scopes
from ctxstore.adapters.store.contract import OPERATIONS, ContextOperations

HEADERS = {
    "actor": {
        "name": "X-Ctxstore-Actor", "in": "header", "required": False,
        "schema": {"type": "string", "maxLength": 200},
        "description": "who acts; recorded as <tenant>:<actor>",
    },
    "if_match": {
        "name": "If-Match", "in": "header", "required": False,
        "schema": {"type": "string"},
        "description": 'write only if the context is at this version ("<version>"); else 409',
    },
    "idempotency_key": {
        "name": "Idempotency-Key", "in": "header", "required": False,
        "schema": {"type": "string", "minLength": 1, "maxLength": 255},
        "description": "a retry with the same key gets the first response, not a second write",
    },
}  # fmt: skip
# The routes of the operations that write only at an expected version: If-Match sets it.
CONDITIONAL = frozenset(
    (op.method.lower(), op.path) for name, op in OPERATIONS.items()
    if op.route and "expected_version" in inspect.signature(getattr(ContextOperations, name)).parameters
)  # fmt: skip
PROBLEM = {
    "type": "object",
    "description": "RFC 9457 problem details; `error` names the exception class ctxstore raised",
    "required": ["type", "title", "status", "detail"],
    "properties": {
        "type": {"type": "string"}, "title": {"type": "string"}, "status": {"type": "integer"},
        "detail": {"type": "string"}, "instance": {"type": "string"},
        "error": {"type": "string"},
    },
    "additionalProperties": True,
}  # fmt: skip
WHY = {
    "401": "no bearer token, or not a valid one",
    "403": "the token lacks the scope the operation needs (its security requirement)",
    "410": "the versions asked for were removed by a retention policy (keep_latest)",
    "404": "no such context for this caller (another tenant's reads as none), message or blob",
    "409": "the context moved past If-Match or expected_version, the id is taken, or the "
    "Idempotency-Key is still running, or (retention) the policy would remove history at the "
    "next sweep and `yes` was not given (the problem's `plan` says what)",
    "413": "the body is larger than CTXSTORE_SERVICE__MAX_BODY_BYTES (an upload: than "
    "CTXSTORE_MAX_BLOB_BYTES)",
    "415": "the body is not application/json",
    "422": "the request is not valid (a field, a message, a transcript, a number's bounds)",
    "500": "the context's stored events are damaged (damaged-context)",
    "503": "the database failed or is unreachable; retry after Retry-After seconds",
}


def problems_of(path: str, method: str, operation: dict[str, Any]) -> list[str]:
    """The problem statuses an operation can answer. 413: any request's body is measured,
    a GET's too."""
    if path == "/health":
        return ["413"]
    found = ["401", "403", "413", "422", "503"]
    names = {p.get("name") for p in operation.get("parameters", [])}
    # A context named in the path, the query, or (retention) the body.
    if "{context_id}" in path or "context_id" in names or path.startswith("/v1/retention"):
        found += ["404", "500"]
    if "{context_id}" in path:
        found.append("410")  # a version (or a history) that retention removed
    if "{sha256}" in path:
        found.append("404")  # no such blob for this tenant
    if method in ("post", "put", "delete"):
        found.append("409")  # a conflict, or an Idempotency-Key still running
    if "requestBody" in operation and path != "/v1/blobs":  # (an upload takes any type)
        found.append("415")
    return sorted(set(found))


def problem_response(status: str) -> dict[str, Any]:
    response: dict[str, Any] = {
        "description": WHY[status],
        "content": {
            "application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}
        },
    }
    if status == "503":
        response["headers"] = {"Retry-After": {"schema": {"type": "integer"}}}
    return response


def document_headers(app: FastAPI) -> None:
    """Add the bearer scheme and the service's own headers to app.openapi()."""
    plain = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = plain()
        components = schema.setdefault("components", {})
        components.setdefault("securitySchemes", {})["bearer"] = {
            "type": "http",
            "scheme": "bearer",
            "description": (
                "a token from CTXSTORE_SERVICE__TOKENS or `ctxstore token create` (none needed "
                "without tokens). Each operation's security requirement lists the scopes any "
                "one of which admits it: write (commands), read (an SDK's reads of its "
                "contexts), audit (every read, and the tenant's audit trail, verification, "
                "exports), admin (erasure)"
            ),
        }
        components.setdefault("schemas", {})["Problem"] = PROBLEM
        for name in ("HTTPValidationError", "ValidationError"):  # FastAPI's, never sent
            components["schemas"].pop(name, None)
        for path, item in schema.get("paths", {}).items():
            for method, operation in item.items():
                responses = operation.setdefault("responses", {})
                for status in problems_of(path, method, operation):
                    responses[status] = problem_response(status)
                if path == "/health":
                    continue  # open to all, acting for no one
                operation["security"] = [{"bearer": sorted(scopes.needed(method, path))}]
                added = [HEADERS["actor"]]
                if method == "post":
                    added.append(HEADERS["idempotency_key"])
                if (method, path) in CONDITIONAL:
                    added.append(HEADERS["if_match"])
                operation.setdefault("parameters", []).extend(added)
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
