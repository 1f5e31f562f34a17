"""Capture at the google-genai client: a `generateContent` body exactly as the client sends
it, and the reply as the client received it (a stream assembled into the one reply it
amounts to), for the model call an integration opened in this context (`open_call`).

Installed once (`install`) on google-genai's BaseApiClient, the layer every `Client` sends
through: the body is taken where the client has built it (`_build_request`: the special keys
gone, `extra_body` merged) and it is what the client then `json.dumps` onto the wire. With no
call open in the context, the client runs as it did (one ContextVar read). Only the async
client is watched (ADK's Gemini model sends through `client.aio`). Nothing here raises into
the client: a failure to capture is logged by the `ctxstore.capture` logger.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

log = logging.getLogger("ctxstore.capture")

GENERATE = "generatecontent"  # in the paths of generateContent and streamGenerateContent


@dataclass
class OpenCall:
    """One model call as far as it went: the body sent, the reply or the error. `finish`
    (the integration's) is called once, when it ended."""

    finish: Callable[[OpenCall], None]
    context: dict[str, Any] = field(default_factory=dict)  # the integration's own
    request: dict[str, Any] | None = None  # the body as sent; None: the client never sent one
    response: dict[str, Any] | None = None
    error: str | None = None
    streamed: bool = False
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    started: float = field(default_factory=time.monotonic)
    latency: float | None = None
    answering: bool = False  # the client is waiting on this call's reply
    done: bool = False

    def end(self, *, response: dict[str, Any] | None = None, error: Any = None) -> None:
        """The call ended with this reply or this error: hand it to `finish`, once."""
        if self.done:
            return
        self.done = True
        self.latency = time.monotonic() - self.started
        self.response = response
        if error is not None:
            self.error = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        try:
            self.finish(self)
        except Exception:  # capture must never break the application
            log.exception("capture: a model call could not be handed to the recorder")


_open: ContextVar[OpenCall | None] = ContextVar("ctxstore_genai_call", default=None)


def open_call(call: OpenCall) -> None:
    """The model call this context is about to make (until another is opened)."""
    _open.set(call)


def current() -> OpenCall | None:
    return _open.get()


def _watched(path: Any) -> OpenCall | None:
    """The open call a request on `path` belongs to: a generateContent not yet sent."""
    call = _open.get()
    if call is None or call.done or GENERATE not in str(path).lower():
        return None
    return call


_installed = False
_install_lock = threading.Lock()


def install() -> None:
    """Watch every google-genai client (once per process)."""
    global _installed
    with _install_lock:
        if _installed:
            return
        from google.genai import _api_client

        base = _api_client.BaseApiClient
        build, single, streamed = (
            base._build_request,
            base.async_request,
            base.async_request_streamed,
        )

        def _build_request(self: Any, http_method: str, path: str, request_dict: Any,
                           http_options: Any = None) -> Any:  # fmt: skip
            built = build(self, http_method, path, request_dict, http_options)
            try:
                call = _watched(path)
                if call is not None and call.request is None and isinstance(built.data, dict):
                    call.request = json.loads(json.dumps(built.data))  # as the wire gets it
            except Exception:
                log.exception("capture: a request body could not be read")
            return built

        async def async_request(self: Any, http_method: str, path: str, request_dict: Any,
                                http_options: Any = None) -> Any:  # fmt: skip
            call = _watched(path)
            if call is None or call.answering:
                return await single(self, http_method, path, request_dict, http_options)
            call.answering = True
            try:
                result = await single(self, http_method, path, request_dict, http_options)
            except BaseException as exc:
                call.end(error=exc)
                raise
            call.end(response=_parsed(result.body))
            return result

        async def async_request_streamed(self: Any, http_method: str, path: str,
                                         request_dict: Any, http_options: Any = None) -> Any:  # fmt: skip
            call = _watched(path)
            if call is None or call.answering:
                return await streamed(self, http_method, path, request_dict, http_options)
            call.answering, call.streamed = True, True
            try:
                chunks = await streamed(self, http_method, path, request_dict, http_options)
            except BaseException as exc:
                call.end(error=exc)
                raise
            return _relayed(call, chunks)

        base._build_request = _build_request  # type: ignore[method-assign]
        base.async_request = async_request  # type: ignore[method-assign]
        base.async_request_streamed = async_request_streamed  # type: ignore[method-assign]
        _installed = True


async def _relayed(call: OpenCall, chunks: AsyncIterator[Any]) -> AsyncIterator[Any]:
    """The stream's chunks unchanged; the call ends with them assembled once it ended."""
    bodies: list[Any] = []
    try:
        async for chunk in chunks:
            bodies.append(getattr(chunk, "body", None))
            yield chunk
    except GeneratorExit:
        call.end(error="the stream was closed before its end (no whole reply)")
        raise
    except BaseException as exc:
        call.end(error=exc)
        raise
    call.end(response=assembled([_parsed(b) for b in bodies]))


def _parsed(body: Any) -> dict[str, Any] | None:
    try:
        found = json.loads(body) if isinstance(body, str | bytes) else body
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def assembled(chunks: list[dict[str, Any] | None]) -> dict[str, Any] | None:
    """A streamed generateContent reply as the one response it amounts to: the first
    candidate's parts in order (adjacent text of one kind joined), the last finish reason,
    usage, model version and response id the chunks gave."""
    found = [c for c in chunks if c]
    if not found:
        return None
    whole: dict[str, Any] = {}
    candidate: dict[str, Any] = {}
    parts: list[dict[str, Any]] = []
    role = None
    for chunk in found:
        for key, value in chunk.items():
            if key != "candidates" and value is not None:
                whole[key] = value
        for c in chunk.get("candidates") or []:
            if not isinstance(c, dict) or c.get("index", 0):
                continue
            content = c.get("content") or {}
            role = content.get("role", role)
            for part in content.get("parts") or []:
                last = parts[-1] if parts else None
                if (last is not None and isinstance(part.get("text"), str)
                        and isinstance(last.get("text"), str)
                        and set(part) - {"text"} == set(last) - {"text"}
                        and bool(part.get("thought")) == bool(last.get("thought"))):  # fmt: skip
                    parts[-1] = {**last, **part, "text": last["text"] + part["text"]}
                else:
                    parts.append(dict(part))
            candidate.update({k: v for k, v in c.items() if k != "content" and v is not None})
    if candidate or parts:
        content_out: dict[str, Any] = {"parts": parts}
        if role is not None:
            content_out["role"] = role
        whole["candidates"] = [{"content": content_out, **candidate}]
    return whole
