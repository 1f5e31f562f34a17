"""Capture through OpenTelemetry's GenAI telemetry.

Two ways in, one conversion:

- The completion hook of `opentelemetry-util-genai`: `OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK=
  ctxstore` picks `completion_hook` from the entry-point group
  `opentelemetry_genai_completion_hook`; every instrumentation built on the util (the OpenAI
  and Anthropic GenAI instrumentations) calls its `on_completion` when a call ends — failed
  calls and streams included — with the call's messages as the util's types. The calls go
  to the store `CTXSTORE_URL` names (a service URL with `CTXSTORE_TOKEN`), opened on first
  use by the background writer, never on the application's thread.
- `span_processor(store)`: a span processor reading the `gen_ai.input.messages`,
  `gen_ai.output.messages`, `gen_ai.system_instructions` and `gen_ai.tool.definitions`
  attributes of the spans that end (Pydantic AI, Microsoft Agent Framework: telemetry of their
  own, with content capture on).

A call is rebuilt as its provider's request body where the span names the provider (OpenAI
Chat Completions or Responses, Anthropic Messages), else as a neutral body (`model`,
`messages` and `system` as GenAI messages, `tools`). The GenAI messages do not carry
everything sent: sampling settings come from the span's `gen_ai.request.*` attributes, and
provider-only keys (`response_format`, `tool_choice`, `stream_options`, `metadata`, a tool's
`strict`, Anthropic's `cache_control` and thinking signatures) are not in them at all.

Each call goes to the context `context_for_key(gen_ai.conversation.id)` names, else one per
trace (`otel-trace:<trace id>`), else one per process. Nothing here raises into the
application: what cannot be read is skipped with a line on the `ctxstore.capture` logger.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import queue
import sys
import threading
import time
import timeit
import uuid
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from datetime import UTC, datetime, timedelta
from typing import Any

from ctxstore.adapters.capture.otel_bodies import build_call, plain
from ctxstore.adapters.capture.recorder import FLUSH_SECONDS, QUEUE, CallRecorder, recorder_for
from ctxstore.domain.captured import CapturedCall

log = logging.getLogger("ctxstore.capture")

INFERENCE = frozenset({"chat", "text_completion", "generate_content"})  # model calls
_PROCESS_KEY = f"otel-process:{os.getpid()}-{uuid.uuid4().hex[:8]}"


# ---- the completion hook ---------------------------------------------------------------


class CompletionHook:
    """`opentelemetry-util-genai`'s CompletionHook recording each model call into a store
    (by default the one CTXSTORE_URL names, opened on first use off the application's
    thread)."""

    def __init__(self, store: Any = None) -> None:
        self._store = store
        self._recorder: CallRecorder | None = None
        self._lock = threading.Lock()

    @property
    def recorder(self) -> CallRecorder:
        if self._recorder is None:
            with self._lock:
                if self._recorder is None:
                    store = self._store if self._store is not None else _env_store()
                    self._recorder = recorder_for(store)
        return self._recorder

    def on_completion(
        self,
        *,
        inputs: Sequence[Any],
        outputs: Sequence[Any],
        system_instruction: Sequence[Any],
        tool_definitions: Sequence[Any] | None = None,
        span: Any = None,
        log_record: Any = None,
    ) -> None:
        try:
            invocation, error = _invocation(sys._getframe(1))
            facts = _facts(span, invocation)
            operation = facts.get("gen_ai.operation.name")
            if operation is not None and operation not in INFERENCE:
                return  # a workflow's or an agent's end: its model calls come on their own
            # What only this moment knows is read here; the messages are converted on the
            # converter's thread (a long conversation takes milliseconds to convert).
            given = [list(m or []) for m in (inputs, outputs, system_instruction,
                                             tool_definitions)]  # fmt: skip
            error_text, streamed = _error_of(error, span, facts), _streamed(invocation, facts)
            timing, call_id = _timing(span, invocation), _call_id(span)
            target = _target(self.recorder, facts, span)
            recorder = self.recorder

            def convert() -> None:
                call = build_call(
                    facts, *(plain(m) for m in given), error=error_text, streamed=streamed,
                    timing=timing, call_id=call_id,
                )  # fmt: skip
                if call is not None:
                    recorder.submit(target, call)

            _converter.put(convert)
        except Exception:  # capture never breaks the application
            log.exception("capture (otel): a call could not be read")

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every call seen so far is converted and recorded (at most `timeout`
        s); whether none is left."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if not _converter.drain(timeout):
            return False
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        return self.recorder.flush(left)


class _Converter:
    """One background thread turning GenAI messages into calls for the recorder, behind a
    bounded queue (a full one drops the call, counted and logged); drained at exit before
    the recorders flush."""

    def __init__(self, maxsize: int = QUEUE) -> None:
        self._queue: queue.Queue[Callable[[], None]] = queue.Queue(maxsize)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.dropped = 0

    def put(self, job: Callable[[], None]) -> None:
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._run, name="ctxstore-capture-otel", daemon=True
                    )
                    self._thread.start()
        try:
            self._queue.put_nowait(job)
        except queue.Full:
            self.dropped += 1
            if self.dropped in (1, 10, 100) or self.dropped % 1000 == 0:
                log.warning("capture (otel): queue full, %d call(s) dropped", self.dropped)

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            try:
                job()
            except Exception:  # never raised: logged
                log.exception("capture (otel): a call could not be read")
            finally:
                self._queue.task_done()

    def drain(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._queue.all_tasks_done:
            while self._queue.unfinished_tasks:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._queue.all_tasks_done.wait(left)
        return True


_converter = _Converter()


@atexit.register  # (after the recorder's own, so it runs first: the calls reach it)
def _drain_at_exit() -> None:
    _converter.drain(FLUSH_SECONDS)


def completion_hook() -> CompletionHook:
    """The zero-argument factory the `opentelemetry_genai_completion_hook` entry point
    names (`OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK=ctxstore`): called once, when the
    instrumentation is set up; the store's code is loaded here and the store opened in the
    background, so that neither waits for the first call nor for the exit."""
    _env_store().warm()
    return CompletionHook()


class _EnvStore:
    """The store CTXSTORE_URL names, opened by the first call that needs it (the
    recorder's writer thread): a store that cannot be reached never holds up the
    application. An http(s):// URL is the service, with CTXSTORE_TOKEN."""

    def __init__(self) -> None:
        self._opened: Any = None
        self._lock = threading.Lock()

    def warm(self) -> None:
        """Load the store's code now (a module first imported while the interpreter exits
        cannot register its exit handlers) and open the store in the background."""
        url = os.environ.get("CTXSTORE_URL") or ""
        if url.startswith(("http://", "https://")):
            import ctxstore.adapters.http.client
        else:
            import ctxstore.adapters.store.facade  # noqa: F401
        threading.Thread(target=self._try_open, name="ctxstore-capture-open", daemon=True).start()

    def _try_open(self) -> None:
        try:
            self._store()
        except Exception as exc:  # noqa: BLE001 - the writer tries again, and says why
            log.debug("capture (otel): the store could not be opened yet: %s", exc)

    def _store(self) -> Any:
        with self._lock:
            if self._opened is None:
                url = os.environ.get("CTXSTORE_URL") or None
                if url is not None and url.startswith(("http://", "https://")):
                    from ctxstore.adapters.http.client import CtxStoreClient

                    self._opened = CtxStoreClient(url, token=os.environ.get("CTXSTORE_TOKEN"))
                else:
                    import ctxstore

                    self._opened = ctxstore.open(url)
            return self._opened

    def record_call(self, context_id: Any, call: CapturedCall) -> Any:
        return self._store().record_call(context_id, call)

    def context_for_key(self, key: str) -> Any:
        return self._store().context_for_key(key)


_env: _EnvStore | None = None
_env_lock = threading.Lock()


def _env_store() -> _EnvStore:
    global _env
    with _env_lock:
        if _env is None:
            _env = _EnvStore()
        return _env


# ---- the span processor (telemetry that does not go through the util) -------------------


def span_processor(store: Any) -> Any:
    """A span processor recording each model-call span's GenAI messages into `store`; add
    it to the tracer provider the framework reports to."""
    from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor

    recorder = recorder_for(store)

    class CtxStoreSpanProcessor(SpanProcessor):
        """Records the model calls whose spans carry GenAI messages."""

        def on_end(self, span: ReadableSpan) -> None:
            _converter.put(lambda: _record_span(recorder, span))  # an ended span is final

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return _converter.drain(timeout_millis / 2000) and recorder.flush(timeout_millis / 2000)

    return CtxStoreSpanProcessor()


def _record_span(recorder: CallRecorder, span: Any) -> None:
    facts = dict(span.attributes or {})
    if facts.get("gen_ai.operation.name") not in INFERENCE:
        return
    loaded = {
        name: _loaded(facts.get(f"gen_ai.{name}"))
        for name in ("input.messages", "output.messages", "system_instructions",
                     "tool.definitions")
    }  # fmt: skip
    if loaded["input.messages"] is None and loaded["output.messages"] is None:
        return  # content capture is off: nothing of what the model saw is on the span
    started = span.start_time or 0
    ended = span.end_time or started
    error = _error_of(None, span, facts) if _failed(span) else None
    call = build_call(
        facts, loaded["input.messages"] or [], loaded["output.messages"] or [],
        loaded["system_instructions"] or [], loaded["tool.definitions"] or [],
        error=error, streamed=bool(facts.get("gen_ai.request.stream")),
        timing=(datetime.fromtimestamp(started / 1e9, UTC), max(0.0, (ended - started) / 1e9))
        if started else None,
        call_id=_call_id(span),
    )  # fmt: skip
    if call is not None:
        recorder.submit(_target(recorder, facts, span), call)


def _loaded(value: Any) -> list[Any] | None:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            log.warning("capture (otel): a GenAI attribute is not JSON; skipped")
            return None
    if isinstance(value, dict):
        return [value]
    return list(value) if isinstance(value, list | tuple) else None


# ---- what the span and the util's invocation say ----------------------------------------


def _invocation(frame: Any) -> tuple[Any, Any]:
    """The util's invocation calling the hook and the error it finished with, from the
    calling frames (they hold the request settings, usage and error even when no tracer
    provider records the span)."""
    found = error = None
    for _ in range(8):
        if frame is None:
            break
        here = frame.f_locals
        me = here.get("self")
        if found is None and hasattr(me, "_completion_hook") and hasattr(me, "span"):
            found = me
        if found is not None and me is found and here.get("error") is not None:
            error = here["error"]
        frame = frame.f_back
    return found, error


def _facts(span: Any, invocation: Any) -> dict[str, Any]:
    """The call's GenAI attributes: the invocation's, then the span's over them."""
    facts: dict[str, Any] = {}
    if invocation is not None:
        for name in ("_start_attributes", "attributes"):
            found = getattr(invocation, name, None)
            if isinstance(found, Mapping):
                facts.update(found)
        get = getattr(invocation, "_get_attributes", None)
        if callable(get):
            try:
                facts.update(get())
            except Exception:  # noqa: BLE001 - a newer util's internals: the span says
                log.debug("capture (otel): the invocation's attributes could not be read")
        conversation = getattr(invocation, "conversation_id", None)
        if conversation and "gen_ai.conversation.id" not in facts:
            facts["gen_ai.conversation.id"] = conversation
    recorded = getattr(span, "attributes", None)
    if isinstance(recorded, Mapping):
        facts.update(recorded)
    return facts


def _error_of(error: Any, span: Any, facts: Mapping[str, Any]) -> str | None:
    if error is not None:
        kind = getattr(error, "type", None) or type(error).__name__
        message = getattr(error, "message", None)
        return f"{kind}: {message}" if message else str(kind)
    status = getattr(span, "status", None)
    if status is not None and getattr(status.status_code, "name", "") == "ERROR":
        return status.description or str(facts.get("error.type") or "the call failed")
    if facts.get("error.type"):
        return str(facts["error.type"])
    return None


def _failed(span: Any) -> bool:
    status = getattr(span, "status", None)
    return status is not None and getattr(status.status_code, "name", "") == "ERROR"


def _streamed(invocation: Any, facts: Mapping[str, Any]) -> bool:
    return bool(getattr(invocation, "_request_stream", None) or facts.get("gen_ai.request.stream"))


def _timing(span: Any, invocation: Any) -> tuple[datetime, float] | None:
    start = getattr(invocation, "_monotonic_start_s", None)
    if isinstance(start, float):
        latency = max(0.0, timeit.default_timer() - start)
        return datetime.now(UTC) - timedelta(seconds=latency), latency
    started = getattr(span, "start_time", None)
    if isinstance(started, int) and started:
        return datetime.fromtimestamp(started / 1e9, UTC), max(0.0, time.time() - started / 1e9)
    return None


def _call_id(span: Any) -> str:
    """The span's trace and span ids (a second recording of the same span is a no-op); a
    span that is not recorded carries its parent's ids, so the call gets ids of its own."""
    with suppress(Exception):  # no span, or not a span
        ctx = span.get_span_context()
        if ctx.is_valid and (span.is_recording() or getattr(span, "end_time", None)):
            return f"otel-{ctx.trace_id:032x}-{ctx.span_id:016x}"
    return uuid.uuid4().hex


def _target(recorder: CallRecorder, facts: Mapping[str, Any], span: Any) -> Any:
    """What finds the call's context: its conversation's key, else its trace's, else the
    process's (a conversation id is a key even when it reads as a UUID)."""
    conversation = facts.get("gen_ai.conversation.id")
    if conversation:
        key = str(conversation)
    else:
        key = _PROCESS_KEY
        with suppress(Exception):  # no span
            ctx = span.get_span_context()
            if ctx.is_valid:
                key = f"otel-trace:{ctx.trace_id:032x}"
    return lambda: recorder.store.context_for_key(key)
