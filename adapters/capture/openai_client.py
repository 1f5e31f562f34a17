"""Capture at the OpenAI python client: a Responses or Chat Completions call recorded with
the body exactly as the client sends it and the reply as the client receives it (a stream
assembled into the one reply it amounts to), for the calls made where a capture is bound
(`bind`: a CtxStoreSession's run, or a trace the Agents SDK trace processor watches;
`bind_call`: one framework call, such as a LlamaIndex LLM's chat).

Installed once (`install`) on the client's base classes, the layer every `OpenAI` and
`AsyncOpenAI` sends through, as OpenTelemetry's instrumentations wrap the client rather than
read the SDK's spans (the Agents SDK's chat-completions spans carry no tools; its Responses
spans carry the input before it is cleaned):
- `request` (sync and async): opens the call for a POST to /responses or /chat/completions,
  ends it with the error the client raises (the application gets it unchanged), or watches
  what the client returns: a parsed reply, a stream, or a raw response (`parse()` later).
- `_build_request`: the body is read from the request it builds, the bytes that go on the
  wire (`extra_body` merged, omitted arguments gone); with retries, the last one sent.
The reply is read from the parsed objects, not the socket: it works with any HTTP client
given to `OpenAI(http_client=...)`, and a stream is never read twice.

With nothing bound, a call costs one ContextVar read. Nothing here raises into the client:
a failure to capture is logged by the `ctxstore.capture` logger.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ctxstore.adapters.capture.recorder import CallRecorder, Target
from ctxstore.domain.captured import CHAT_API, RESPONSES_API, CapturedCall

log = logging.getLogger("ctxstore.capture")

WATCHED = {"/responses": RESPONSES_API, "/chat/completions": CHAT_API}
TERMINAL = ("response.completed", "response.failed", "response.incomplete")


@dataclass
class Binding:
    """Where the calls made in a context go, while `live()` says they still belong there."""

    recorder: CallRecorder
    target: Target
    source: str = "agents"
    for_version: int | None = None
    live: Callable[[], bool] = lambda: True
    on_open: Callable[[], None] | None = None  # told of each call opened through it


# One framework call binds over a session's run, which binds over a trace's: the calls
# belong in the most specific context that holds them.
_call: ContextVar[Binding | None] = ContextVar("ctxstore_openai_call_binding", default=None)
_session: ContextVar[Binding | None] = ContextVar("ctxstore_openai_session", default=None)
_trace: ContextVar[Binding | None] = ContextVar("ctxstore_openai_trace", default=None)


def bind(binding: Binding | None, *, trace: bool = False) -> None:
    """Record the calls this context makes from now on through `binding` (None: stop)."""
    (_trace if trace else _session).set(binding)


def bind_call(binding: Binding) -> Callable[[], None]:
    """Record the calls this context makes through `binding` until the function returned
    is called (from this context or another: it only unbinds where `binding` is bound)."""
    previous = _call.get()
    _call.set(binding)

    def unbind() -> None:
        if _call.get() is binding:
            _call.set(previous)

    return unbind


def bound() -> Binding | None:
    for var in (_call, _session, _trace):
        binding = var.get()
        if binding is not None and binding.live():
            return binding
    return None


# Agents SDK spans a client capture happened in: the trace processor does not rebuild those.
_spans: OrderedDict[str, None] = OrderedDict()
_spans_lock = threading.Lock()


def captured_in(span_id: str) -> bool:
    with _spans_lock:
        return span_id in _spans


def _note_span() -> None:
    try:
        from agents.tracing import get_current_span
    except ImportError:  # (no Agents SDK: nothing reads these)
        return
    span_id = getattr(get_current_span(), "span_id", None)
    if isinstance(span_id, str) and span_id and span_id != "no-op":
        with _spans_lock:
            _spans[span_id] = None
            while len(_spans) > 10000:
                _spans.popitem(last=False)


@dataclass
class _Call:
    """One call as far as it went; `end` hands it to the recorder, once."""

    binding: Binding
    api: str
    streamed: bool
    request: dict[str, Any] | None = None
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    started: float = field(default_factory=time.monotonic)
    done: bool = False

    def end(self, response: dict[str, Any] | None = None, error: Any = None) -> None:
        if self.done:
            return
        self.done = True
        try:
            if error is not None and not isinstance(error, str):
                error = f"{type(error).__name__}: {error}"
            if response is None and error is None:
                error = "the client gave no reply"
            if self.request is None:
                log.warning("capture: a %s call's body was not seen; not recorded", self.api)
                return
            call = CapturedCall(
                request=self.request, response=response, error=error, api=self.api,
                source=self.binding.source, started_at=self.started_at,
                latency=time.monotonic() - self.started, streamed=self.streamed,
                for_version=self.binding.for_version,
            )  # fmt: skip
            self.binding.recorder.submit(self.binding.target, call)
        except Exception:  # capture must never break the application
            log.exception("capture: a model call could not be handed to the recorder")


_current: ContextVar[_Call | None] = ContextVar("ctxstore_openai_call", default=None)


def _open(options: Any, stream: bool) -> _Call | None:
    api = WATCHED.get(str(getattr(options, "url", "")))
    if api is None or str(getattr(options, "method", "")).lower() != "post":
        return None
    try:
        binding = bound()
        if binding is None:
            return None
        _note_span()
        if binding.on_open is not None:
            binding.on_open()
        return _Call(binding, api, bool(stream))
    except Exception:
        log.exception("capture: a model call could not be opened")
        return None


def plain(obj: Any) -> dict[str, Any] | None:
    """A parsed reply as the JSON it was read from."""
    if isinstance(obj, dict):
        return obj
    to_dict = getattr(obj, "to_dict", None)
    if callable(to_dict):
        return to_dict(mode="json")  # type: ignore[no-any-return]
    return None


def _failure(response: dict[str, Any]) -> str | None:
    """A Responses reply that did not complete, as an error (its body is kept too)."""
    status = response.get("status")
    if status in (None, "completed"):
        return None
    detail = response.get("error") or response.get("incomplete_details") or {}
    return f"response {status}: {detail.get('message') or detail.get('reason') or ''}".strip()


def _ended(call: _Call, result: Any) -> Any:
    """Watch what the client returned; the call ends when its reply is whole."""
    try:
        from openai._response import APIResponse, AsyncAPIResponse
        from openai._streaming import AsyncStream, Stream

        if isinstance(result, AsyncStream | Stream):
            relay = _arelay if isinstance(result, AsyncStream) else _relay
            result._iterator = relay(call, result._iterator)  # type: ignore[arg-type]
        elif isinstance(result, APIResponse | AsyncAPIResponse):
            _watch_parse(call, result)
        else:
            response = plain(result)
            call.end(response, None if response is None else _failure(response))
    except Exception:
        log.exception("capture: a model reply could not be watched")
        call.end(error="ctxstore could not read the reply")
    return result


def _watch_parse(call: _Call, raw: Any) -> None:
    """A raw response (`with_raw_response`, `with_streaming_response`): the reply is what
    its `parse()` gives (a stream or a parsed reply), read the first time it is asked."""
    from openai._response import AsyncAPIResponse

    parse = raw.parse
    if isinstance(raw, AsyncAPIResponse):

        async def aparse(**kwargs: Any) -> Any:
            parsed = await parse(**kwargs)
            return parsed if kwargs or call.done else _ended(call, parsed)

        raw.parse = aparse  # type: ignore[method-assign]
    else:

        def sparse(**kwargs: Any) -> Any:
            parsed = parse(**kwargs)
            return parsed if kwargs or call.done else _ended(call, parsed)

        raw.parse = sparse


class _Assembly:
    """A stream's events assembled into the reply they amount to."""

    def __init__(self, call: _Call) -> None:
        self.call = call
        self.chat: dict[str, Any] | None = None

    def take(self, event: Any) -> None:
        if self.call.done:
            return
        try:
            if self.call.api == RESPONSES_API:
                kind = getattr(event, "type", None)
                if kind in TERMINAL:
                    response = plain(event.response) or {}
                    self.call.end(response, _failure(response))
                elif kind == "error":
                    self.call.end(error=f"{getattr(event, 'code', None) or 'error'}: "
                                        f"{getattr(event, 'message', '')}")  # fmt: skip
            else:
                chunk = plain(event)
                if chunk is not None:
                    self.chat = add_chunk(self.chat, chunk)
        except Exception:
            log.exception("capture: a streamed event could not be read")

    def finish(self, error: BaseException | str | None = None) -> None:
        if self.call.done:
            return
        if error is None and self.chat is not None:
            self.call.end(self.chat)
        else:
            self.call.end(error=error or "the stream ended before the reply was whole")


async def _arelay(call: _Call, events: AsyncIterator[Any]) -> AsyncIterator[Any]:
    """The stream's events unchanged; the call ends with them assembled."""
    whole = _Assembly(call)
    try:
        async for event in events:
            whole.take(event)
            yield event
    except BaseException as exc:
        whole.finish(exc if not isinstance(exc, GeneratorExit) else "the stream was closed early")
        raise
    whole.finish()


def _relay(call: _Call, events: Iterator[Any]) -> Iterator[Any]:
    whole = _Assembly(call)
    try:
        for event in events:
            whole.take(event)
            yield event
    except BaseException as exc:
        whole.finish(exc if not isinstance(exc, GeneratorExit) else "the stream was closed early")
        raise
    whole.finish()


def add_chunk(whole: dict[str, Any] | None, chunk: dict[str, Any]) -> dict[str, Any]:
    """A chat.completion chunk added to the chat.completion assembled so far: content and
    tool calls' arguments concatenated per choice and index, the usage of the last chunk."""
    if whole is None:
        whole = {"id": chunk.get("id"), "object": "chat.completion",
                 "created": chunk.get("created"), "model": chunk.get("model"), "choices": []}  # fmt: skip
        if chunk.get("system_fingerprint") is not None:
            whole["system_fingerprint"] = chunk["system_fingerprint"]
    if chunk.get("usage"):
        whole["usage"] = chunk["usage"]
    choices: list[dict[str, Any]] = whole["choices"]
    for part in chunk.get("choices") or []:
        index = part.get("index", 0)
        while len(choices) <= index:
            choices.append({"index": len(choices), "message": {"role": "assistant",
                            "content": None}, "finish_reason": None})  # fmt: skip
        choice, delta = choices[index], part.get("delta") or {}
        message = choice["message"]
        for key in ("content", "refusal", "reasoning_content"):
            if delta.get(key) is not None:
                message[key] = (message.get(key) or "") + delta[key]
        if delta.get("role"):
            message["role"] = delta["role"]
        for given in delta.get("tool_calls") or []:
            calls = message.setdefault("tool_calls", [])
            at = given.get("index", len(calls))
            while len(calls) <= at:
                calls.append({"id": None, "type": "function",
                              "function": {"name": "", "arguments": ""}})  # fmt: skip
            found, function = calls[at], given.get("function") or {}
            for key in ("id", "type"):
                if given.get(key):
                    found[key] = given[key]
            for key in ("name", "arguments"):
                if function.get(key):
                    found["function"][key] += function[key]
        if part.get("finish_reason") is not None:
            choice["finish_reason"] = part["finish_reason"]
        if part.get("logprobs") is not None:
            choice["logprobs"] = part["logprobs"]
    return whole


_installed = False
_install_lock = threading.Lock()


def install() -> None:
    """Watch every OpenAI client (once per process); never raises."""
    global _installed
    with _install_lock:
        if _installed:
            return
        try:
            _install()
            _installed = True
        except Exception:
            log.exception("capture: the OpenAI client could not be watched")


def _install() -> None:
    from openai import _base_client as base

    build = base.BaseClient._build_request
    sync_request, async_request = base.SyncAPIClient.request, base.AsyncAPIClient.request

    def _build_request(self: Any, options: Any, *, retries_taken: int = 0) -> Any:
        built = build(self, options, retries_taken=retries_taken)
        call = _current.get()
        if call is not None and not call.done:
            try:
                call.request = json.loads(built.content)  # the bytes on the wire
            except Exception:
                log.exception("capture: a request body could not be read")
        return built

    def request(self: Any, cast_to: Any, options: Any, *, stream: bool = False,
                stream_cls: Any = None) -> Any:  # fmt: skip
        call = _open(options, stream)
        if call is None:
            return sync_request(self, cast_to, options, stream=stream, stream_cls=stream_cls)
        token = _current.set(call)
        try:
            result = sync_request(self, cast_to, options, stream=stream, stream_cls=stream_cls)
        except BaseException as exc:
            call.end(error=exc)
            raise
        finally:
            _current.reset(token)
        return _ended(call, result)

    async def arequest(self: Any, cast_to: Any, options: Any, *, stream: bool = False,
                       stream_cls: Any = None) -> Any:  # fmt: skip
        call = _open(options, stream)
        if call is None:
            return await async_request(self, cast_to, options, stream=stream,
                                       stream_cls=stream_cls)  # fmt: skip
        token = _current.set(call)
        try:
            result = await async_request(self, cast_to, options, stream=stream,
                                         stream_cls=stream_cls)  # fmt: skip
        except BaseException as exc:
            call.end(error=exc)
            raise
        finally:
            _current.reset(token)
        return _ended(call, result)

    base.BaseClient._build_request = _build_request  # type: ignore[method-assign]
    base.SyncAPIClient.request = request  # type: ignore[method-assign]
    base.AsyncAPIClient.request = arequest  # type: ignore[method-assign]
