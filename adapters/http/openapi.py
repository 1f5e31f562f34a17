"""What the OpenAPI description says beyond the routes' own parameters: the bearer scheme and
the headers the service reads itself (Authorization, X-Ctxstore-Actor, If-Match,
Idempotency-Key), so that generated clients send them."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

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
CONDITIONAL = ("insert", "delete", "replace", "compress", "expand", "batch-start", "batch-end")


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
            "description": "a token from CTXSTORE_SERVICE__TOKENS (none needed without tokens)",
        }
        for path, item in schema.get("paths", {}).items():
            if path == "/health":
                continue
            for method, operation in item.items():
                operation["security"] = [{"bearer": []}]
                added = [HEADERS["actor"]]
                if method == "post":
                    added.append(HEADERS["idempotency_key"])
                    if path.rsplit("/", 1)[-1] in CONDITIONAL:
                        added.append(HEADERS["if_match"])
                operation.setdefault("parameters", []).extend(added)
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
