"""ASGI middleware in front of the API: a request size limit, and idempotency keys for POSTs.

The body is read once, bounded, before the route sees it: a request over the limit answers
413 without being parsed. A POST with an `Idempotency-Key` header is fingerprinted (method,
path, query, body); the first with a key runs, and its successful response is stored and
replayed to every retry with the same key and fingerprint (`Idempotent-Replayed: true`).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ctxstore.adapters.http.auth import ACTOR_HEADER, Tokens
from ctxstore.adapters.http.problems import for_error, log, problem
from ctxstore.adapters.storage.idempotency import IdempotencyKeys
from ctxstore.adapters.store.faults import typed
from ctxstore.domain.errors import CtxStoreError, StoreUnavailableError

KEY_HEADER = b"idempotency-key"
CONTEXT_PATH = re.compile(r"^/v1/contexts/([0-9a-fA-F-]{32,36})/")
T = TypeVar("T")
REPLAYED_HEADERS = ("content-type", "etag", "location")


def _json(kind: bytes) -> bool:
    return kind == b"application/json" or (
        kind.startswith(b"application/") and kind.endswith(b"+json")
    )


UPLOADS = "/v1/blobs"  # attachments' uploads: bytes, not JSON, and their own size limit


class RequestGuard:
    def __init__(
        self,
        app: ASGIApp,
        *,
        max_body: int,
        tokens: Tokens,
        keys: IdempotencyKeys,
        pool: ThreadPoolExecutor,
    ) -> None:
        self.app = app
        self.max_body = max_body
        self.tokens = tokens
        self.keys = keys
        self.pool = pool

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        # The keys live in the database: an outage is StoreUnavailableError (503), not 500.
        call = functools.partial(typed(fn), *args)
        return await asyncio.get_running_loop().run_in_executor(self.pool, call)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        path = scope["path"]
        if path == UPLOADS and scope["method"] == "POST":
            # An upload is raw bytes, read as a stream by its route under the blob limit.
            await self.app(scope, receive, send)
            return
        declared = headers.get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_body):
            await self._reject(scope, receive, send, 413, "too-large", self._too_large())
            return
        body = bytearray()
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > self.max_body:
                await self._reject(scope, receive, send, 413, "too-large", self._too_large())
                return

        kind = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
        if body and scope["method"] in ("POST", "PUT", "PATCH") and not _json(kind):
            detail = (
                f"send JSON with Content-Type: application/json, not {kind.decode('latin-1')!r}"
                if kind
                else "send JSON with Content-Type: application/json"
            )
            await self._reject(scope, receive, send, 415, "unsupported-media-type", detail)
            return

        delivered = False

        async def replay_body() -> Message:
            # The body once; after it, what the server says next (a disconnect), as ASGI
            # has it: a response that listens for the client leaving must not spin.
            nonlocal body, delivered
            if delivered:
                return await receive()
            delivered = True
            chunk, body = bytes(body), bytearray()
            return {"type": "http.request", "body": chunk, "more_body": False}

        key = headers.get(KEY_HEADER)
        if scope["method"] != "POST" or key is None:
            await self.app(scope, replay_body, send)
            return
        text = key.decode("latin-1")
        if not 1 <= len(text) <= 255 or not text.isprintable() or not text.isascii():
            detail = "Idempotency-Key must be 1-255 printable ASCII characters"
            await self._reject(scope, receive, send, 422, "invalid-idempotency-key", detail)
            return
        try:
            caller = self.tokens.caller(
                headers.get(b"authorization", b"").decode("latin-1"),
                headers.get(ACTOR_HEADER.encode(), b"").decode("latin-1"),
            )
        except CtxStoreError:
            # Not authenticated, or a bad actor header: the route answers it (401, 422)
            # exactly as it does without a key; nothing is claimed for a refused request.
            await self.app(scope, replay_body, send)
            return
        fingerprint = hashlib.sha256(
            b"\0".join([b"POST", path.encode(), scope.get("query_string", b""), bytes(body)])
        ).hexdigest()
        named = CONTEXT_PATH.match(path)
        context = named.group(1).lower() if named else None
        try:
            held = await self._run(self.keys.claim, caller.scope, text, fingerprint, context)
        except StoreUnavailableError as exc:
            await for_error(exc, scope["path"])(scope, receive, send)
            return
        if held is not None:
            await self._answer_held(scope, receive, send, held.fingerprint == fingerprint, held)
            return
        sent: list[Message] = []

        async def capture(message: Message) -> None:
            sent.append(message)

        try:
            await self.app(scope, replay_body, capture)
        except BaseException:
            await self._settle(self.keys.release, caller.scope, text)
            raise
        start = next(m for m in sent if m["type"] == "http.response.start")
        status = int(start["status"])
        if 200 <= status < 300:
            kept = {
                k.decode("latin-1"): v.decode("latin-1")
                for k, v in start.get("headers", [])
                if k.decode("latin-1").lower() in REPLAYED_HEADERS
            }
            payload = b"".join(
                m.get("body", b"") for m in sent if m["type"] == "http.response.body"
            )
            record = json.dumps({"headers": kept, "body": payload.decode("utf-8")}).encode()
            await self._settle(self.keys.complete, caller.scope, text, status, record)
        else:
            await self._settle(self.keys.release, caller.scope, text)
        for m in sent:
            await send(m)

    async def _settle(self, fn: Callable[..., Any], *args: Any) -> None:
        """Complete or release a key. The request's own answer is sent whatever happens
        here: a write that succeeded was stored, and must not be reported as failed (a key
        left pending answers its retries 409 until CTXSTORE_SERVICE__IDEMPOTENCY_PENDING_SECONDS)."""
        try:
            await self._run(fn, *args)
        except StoreUnavailableError as exc:
            log.warning("idempotency key %s: could not be settled: %s", args[1], exc)

    def _too_large(self) -> str:
        return f"the request body exceeds {self.max_body} bytes"

    async def _answer_held(
        self, scope: Scope, receive: Receive, send: Send, same: bool, held: Any
    ) -> None:
        if not same:
            detail = "this Idempotency-Key was used for a different request"
            await self._reject(scope, receive, send, 422, "idempotency-key-reused", detail)
        elif held.status is None:
            detail = "a request with this Idempotency-Key is still running; retry shortly"
            await self._reject(
                scope, receive, send, 409, "request-in-progress", detail, {"retry-after": "1"}
            )
        else:
            record = json.loads(held.body)
            headers = [(k.encode(), v.encode()) for k, v in record["headers"].items()]
            headers.append((b"idempotent-replayed", b"true"))
            payload = record["body"].encode("utf-8")
            headers.append((b"content-length", str(len(payload)).encode()))
            await send({"type": "http.response.start", "status": held.status, "headers": headers})
            await send({"type": "http.response.body", "body": payload})

    @staticmethod
    async def _reject(
        scope: Scope,
        receive: Receive,
        send: Send,
        status: int,
        slug: str,
        detail: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        response = problem(status, slug, detail, instance=scope["path"], headers=headers)
        await response(scope, receive, send)
