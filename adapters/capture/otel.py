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
import base64
import dataclasses
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
from enum import Enum
from typing import Any, ClassVar

from ctxstore.adapters.capture.recorder import FLUSH_SECONDS, QUEUE, CallRecorder, recorder_for
from ctxstore.domain.captured import ANTHROPIC_API, CHAT_API, RESPONSES_API, CapturedCall
from ctxstore.domain.errors import CtxStoreError

log = logging.getLogger("ctxstore.capture")

SOURCE = "otel"
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
                    facts, *(_plain(m) for m in given), error=error_text, streamed=streamed,
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


# ---- GenAI messages into a provider's request body ----------------------------------------


def build_call(
    facts: Mapping[str, Any], inputs: list[Any], outputs: list[Any], system: list[Any],
    tools: list[Any], *, error: str | None, streamed: bool,
    timing: tuple[datetime, float] | None, call_id: str,
) -> CapturedCall | None:  # fmt: skip
    """A CapturedCall from GenAI messages (as JSON) and the call's attributes; None (with
    a log line) when nothing storable is left."""
    provider = str(facts.get("gen_ai.provider.name") or facts.get("gen_ai.system") or "")
    provider = provider.lower()
    if provider in ("openai", "azure.ai.openai", "az.ai.openai"):
        api: str | None = RESPONSES_API if facts.get("openai.api.type") == "responses" else CHAT_API
    elif provider in ("anthropic", "aws.bedrock.anthropic"):
        api = ANTHROPIC_API
    else:
        api = None
    shape = _SHAPES.get(api, _Neutral)(facts)
    inputs = [m for m in inputs if _is_message(m)]
    outputs = [m for m in outputs if _is_message(m)]
    request = shape.request(inputs, system, tools)
    response = None if error is not None else shape.response(outputs)
    if response is None and error is None:
        error = "the call ended without a reply (no error given)"
    started, latency = timing if timing is not None else (None, None)
    try:
        call = CapturedCall(
            request=request, response=response, error=error, api=api, source=SOURCE,
            model=_str(facts.get("gen_ai.response.model") or facts.get("gen_ai.request.model")),
            prompt_tokens=_count(facts.get("gen_ai.usage.input_tokens")),
            completion_tokens=_count(facts.get("gen_ai.usage.output_tokens")),
            started_at=started, latency=latency, streamed=streamed, call_id=call_id[:200],
        )  # fmt: skip
        call.check()
    except (CtxStoreError, ValueError) as exc:
        log.warning("capture (otel): a call was not recorded: %s: %s", type(exc).__name__,
                    str(exc)[:300])  # fmt: skip
        return None
    if shape.skipped:
        log.info("capture (otel): %d part(s) of unknown types left out (%s)",
                 len(shape.skipped), ", ".join(sorted(set(shape.skipped))[:5]))  # fmt: skip
    return call


def _is_message(value: Any) -> bool:
    if isinstance(value, dict) and isinstance(value.get("parts"), list):
        return True
    log.info("capture (otel): a message without parts left out")
    return False


class _Shape:
    """Builds one API's request and reply from GenAI messages."""

    api: str | None = None

    def __init__(self, facts: Mapping[str, Any]) -> None:
        self.facts = facts
        self.skipped: list[str] = []

    def request(self, inputs: list[Any], system: list[Any], tools: list[Any]) -> dict[str, Any]:
        raise NotImplementedError

    def response(self, outputs: list[Any]) -> dict[str, Any] | None:
        raise NotImplementedError

    def settings(self, names: Mapping[str, str]) -> dict[str, Any]:
        """The request's sampling settings the span names (`gen_ai.request.*`)."""
        found: dict[str, Any] = {}
        for attribute, key in names.items():
            value = self.facts.get(f"gen_ai.request.{attribute}")
            if value is not None:
                found[key] = list(value) if isinstance(value, tuple) else value
        return found

    def model(self, name: str) -> dict[str, Any]:
        value = self.facts.get(f"gen_ai.{name}.model")
        return {} if value is None else {"model": value}

    def usage(self, input_name: str, output_name: str) -> dict[str, Any]:
        got_in = _count(self.facts.get("gen_ai.usage.input_tokens"))
        got_out = _count(self.facts.get("gen_ai.usage.output_tokens"))
        if got_in is None and got_out is None:
            return {}
        return {"usage": {input_name: got_in or 0, output_name: got_out or 0}}

    def skip(self, part: Mapping[str, Any]) -> None:
        self.skipped.append(str(part.get("type")))


class _Chat(_Shape):
    api = CHAT_API
    SETTINGS: ClassVar[dict[str, str]] = {"temperature": "temperature", "top_p": "top_p", "seed": "seed",
                "max_tokens": "max_completion_tokens", "frequency_penalty": "frequency_penalty",
                "presence_penalty": "presence_penalty", "stop_sequences": "stop",
                "choice.count": "n"}  # fmt: skip

    def request(self, inputs: list[Any], system: list[Any], tools: list[Any]) -> dict[str, Any]:
        messages: list[dict[str, Any]] = []
        if _texts(system):
            messages.append({"role": "system", "content": _texts(system)})
        for m in inputs:
            messages.extend(self.message(m))
        body: dict[str, Any] = {**self.model("request"), "messages": messages}
        if tools:
            body["tools"] = [{"type": "function", "function": _function(t)} for t in tools]
        return {**body, **self.settings(self.SETTINGS)}

    def message(self, m: Mapping[str, Any]) -> list[dict[str, Any]]:
        role, parts = str(m.get("role") or "user"), m["parts"]
        answers = [p for p in parts if _kind(p) == "tool_call_response"]
        if role == "tool" or (answers and len(answers) == len(parts)):
            return [{"role": "tool", "tool_call_id": p.get("id"), "content": _as_text(_result(p))}
                    for p in answers]  # fmt: skip
        named = {"name": m["name"]} if m.get("name") else {}
        if role == "assistant":
            calls = [_openai_call(p) for p in parts if _kind(p) == "tool_call"]
            text = _texts(parts) or None
            for p in parts:
                if _kind(p) not in ("text", "tool_call"):
                    self.skip(p)
            return [{"role": role, **named, "content": text,
                     **({"tool_calls": calls} if calls else {})}]  # fmt: skip
        return [{"role": role, **named, "content": self.content(parts)}]

    def content(self, parts: list[Any]) -> Any:
        if parts and all(_kind(p) == "text" for p in parts) and len(parts) == 1:
            return str(parts[0].get("content", ""))
        blocks: list[dict[str, Any]] = []
        for p in parts:
            kind = _kind(p)
            if kind == "text":
                blocks.append({"type": "text", "text": str(p.get("content", ""))})
            elif kind in ("blob", "uri"):
                blocks.append({"type": "image_url", "image_url": {"url": _url(p)}})
            elif kind == "file":
                blocks.append({"type": "file", "file": {"file_id": p.get("file_id")}})
            else:
                self.skip(p)
        return blocks

    def response(self, outputs: list[Any]) -> dict[str, Any] | None:
        reasons = list(self.facts.get("gen_ai.response.finish_reasons") or ())
        choices = []
        for i, m in enumerate(outputs):
            message = self.message({**m, "role": "assistant"})[0]
            reason = m.get("finish_reason") or (reasons[i] if i < len(reasons) else "stop")
            choices.append(
                {
                    "index": i,
                    "message": message,
                    "finish_reason": "tool_calls" if reason == "tool_call" else reason,
                }
            )
        if not choices:
            return None
        response_id = self.facts.get("gen_ai.response.id")
        return {**({"id": response_id} if response_id else {}), "object": "chat.completion",
                **self.model("response"), "choices": choices,
                **self.usage("prompt_tokens", "completion_tokens")}  # fmt: skip


class _Responses(_Shape):
    api = RESPONSES_API
    SETTINGS: ClassVar[dict[str, str]] = {"temperature": "temperature", "top_p": "top_p",
                "max_tokens": "max_output_tokens"}  # fmt: skip

    def request(self, inputs: list[Any], system: list[Any], tools: list[Any]) -> dict[str, Any]:
        body: dict[str, Any] = {**self.model("request")}
        if _texts(system):
            body["instructions"] = _texts(system)
        body["input"] = [item for m in inputs for item in self.items(m, sent=True)]
        if tools:
            body["tools"] = [{"type": "function", **_function(t)} for t in tools]
        return {**body, **self.settings(self.SETTINGS)}

    def items(self, m: Mapping[str, Any], *, sent: bool) -> list[dict[str, Any]]:
        role, found = str(m.get("role") or "user"), []
        text_kind = "input_text" if sent and role != "assistant" else "output_text"
        content: list[dict[str, Any]] = []
        for p in m["parts"]:
            kind = _kind(p)
            if kind == "text":
                content.append({"type": text_kind, "text": str(p.get("content", ""))})
            elif kind in ("blob", "uri") and sent:
                content.append({"type": "input_image", "image_url": _url(p)})
            elif kind == "tool_call":
                found.append({"type": "function_call", "call_id": p.get("id"),
                              "name": p.get("name"), "arguments": _arguments(p)})  # fmt: skip
            elif kind == "tool_call_response":
                found.append({"type": "function_call_output", "call_id": p.get("id"),
                              "output": _as_text(_result(p))})  # fmt: skip
            elif kind in ("reasoning", "thinking"):
                found.append({"type": "reasoning", "summary": [
                    {"type": "summary_text", "text": str(p.get("content", ""))}]})  # fmt: skip
            else:
                self.skip(p)
        if content:
            if sent and role != "assistant" and len(content) == 1 and len(m["parts"]) == 1:
                message: dict[str, Any] = {"role": role, "content": content[0]["text"]}
            elif sent and role != "assistant":
                message = {"role": role, "content": content}
            else:
                message = {"type": "message", "role": "assistant", "content": content}
            found.insert(0, message)
        return found

    def response(self, outputs: list[Any]) -> dict[str, Any] | None:
        output = [item for m in outputs for item in self.items(m, sent=False)]
        if not outputs:
            return None
        response_id = self.facts.get("gen_ai.response.id")
        return {**({"id": response_id} if response_id else {}), "object": "response",
                **self.model("response"), "status": "completed", "output": output,
                **self.usage("input_tokens", "output_tokens")}  # fmt: skip


class _Anthropic(_Shape):
    api = ANTHROPIC_API
    SETTINGS: ClassVar[dict[str, str]] = {"max_tokens": "max_tokens", "temperature": "temperature", "top_p": "top_p",
                "top_k": "top_k", "stop_sequences": "stop_sequences"}  # fmt: skip
    STOPS: ClassVar[dict[str, str]] = {
        "tool_call": "tool_use",
        "stop": "end_turn",
        "length": "max_tokens",
    }

    def request(self, inputs: list[Any], system: list[Any], tools: list[Any]) -> dict[str, Any]:
        body: dict[str, Any] = {**self.model("request")}
        body.update(self.settings({"max_tokens": "max_tokens"}))
        if _texts(system):
            body["system"] = _texts(system)
        body["messages"] = [self.message(m) for m in inputs]
        if tools:
            body["tools"] = []
            for t in tools:
                f = _function(t)
                body["tools"].append({"name": f.get("name"),
                                      **({"description": f["description"]}
                                         if "description" in f else {}),
                                      "input_schema": f.get("parameters") or {"type": "object"}})  # fmt: skip
        return {**body, **self.settings(self.SETTINGS)}

    def message(self, m: Mapping[str, Any]) -> dict[str, Any]:
        role = "assistant" if m.get("role") == "assistant" else "user"
        parts = m["parts"]
        if len(parts) == 1 and _kind(parts[0]) == "text":
            return {"role": role, "content": str(parts[0].get("content", ""))}
        return {"role": role, "content": self.blocks(parts)}

    def blocks(self, parts: list[Any]) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        for p in parts:
            kind = _kind(p)
            if kind == "text":
                found.append({"type": "text", "text": str(p.get("content", ""))})
            elif kind == "tool_call":
                found.append({"type": "tool_use", "id": p.get("id"), "name": p.get("name"),
                              "input": _json_arguments(p)})  # fmt: skip
            elif kind == "tool_call_response":
                found.append({"type": "tool_result", "tool_use_id": p.get("id"),
                              "content": _as_text(_result(p))})  # fmt: skip
            elif kind in ("reasoning", "thinking"):
                found.append({"type": "thinking", "thinking": str(p.get("content", ""))})
            elif kind == "blob":
                found.append({"type": "image", "source": {
                    "type": "base64", "media_type": p.get("mime_type"),
                    "data": p.get("content")}})  # fmt: skip
            elif kind == "uri":
                found.append({"type": "image", "source": {"type": "url", "url": p.get("uri")}})
            else:
                self.skip(p)
        return found

    def response(self, outputs: list[Any]) -> dict[str, Any] | None:
        if not outputs:
            return None
        blocks = [b for m in outputs for b in self.blocks(m["parts"])]
        reasons = list(self.facts.get("gen_ai.response.finish_reasons") or ())
        reason = outputs[-1].get("finish_reason") or (reasons[0] if reasons else None)
        response_id = self.facts.get("gen_ai.response.id")
        return {**({"id": response_id} if response_id else {}), "type": "message",
                "role": "assistant", **self.model("response"), "content": blocks,
                "stop_reason": self.STOPS.get(reason, reason) if reason else None,
                **self.usage("input_tokens", "output_tokens")}  # fmt: skip


class _Neutral(_Shape):
    """No provider named: the GenAI messages as they are (api None)."""

    def request(self, inputs: list[Any], system: list[Any], tools: list[Any]) -> dict[str, Any]:
        body: dict[str, Any] = {**self.model("request"), "messages": inputs}
        if system:
            body["system"] = system
        if tools:
            body["tools"] = tools
        return {**body, **self.settings(_Chat.SETTINGS)}

    def response(self, outputs: list[Any]) -> dict[str, Any] | None:
        if not outputs:
            return None
        return {**self.model("response"), "messages": outputs}


_SHAPES: dict[str | None, type[_Shape]] = {
    CHAT_API: _Chat, RESPONSES_API: _Responses, ANTHROPIC_API: _Anthropic, None: _Neutral,
}  # fmt: skip


# ---- parts ---------------------------------------------------------------------------


def _plain(value: Any, depth: int = 0) -> Any:
    """The util's message types (dataclasses, enums, bytes) as JSON values."""
    if depth > 64:
        return None
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, Enum):
        return _plain(value.value, depth + 1)
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode("ascii")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name), depth + 1)
                for f in dataclasses.fields(value)
                if getattr(value, f.name) is not None}  # fmt: skip
    if isinstance(value, Mapping):
        return {str(k): _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v, depth + 1) for v in value]
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        with suppress(Exception):  # an object we cannot read is kept as its text
            return _plain(dump(mode="json"), depth + 1)
    return str(value)


def _kind(part: Any) -> str | None:
    return part.get("type") if isinstance(part, dict) else None


def _texts(parts: list[Any]) -> str:
    return "\n".join(str(p.get("content", "")) for p in parts if _kind(p) == "text")


def _result(part: Mapping[str, Any]) -> Any:
    return part.get("response", part.get("result"))


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _arguments(part: Mapping[str, Any]) -> str:
    """A tool call's arguments as the JSON text OpenAI sends (an unparsed text as it was)."""
    value = part.get("arguments")
    return "{}" if value is None else _as_text(value)


def _json_arguments(part: Mapping[str, Any]) -> Any:
    value = part.get("arguments")
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return {} if value is None else value


def _openai_call(part: Mapping[str, Any]) -> dict[str, Any]:
    return {"id": part.get("id"), "type": "function",
            "function": {"name": part.get("name"), "arguments": _arguments(part)}}  # fmt: skip


def _function(tool: Any) -> dict[str, Any]:
    """A tool definition as {name, description, parameters} (flat or under `function`)."""
    if not isinstance(tool, dict):
        return {"name": str(tool)}
    nested = tool.get("function")
    inner: dict[str, Any] = nested if isinstance(nested, dict) else tool
    found = {"name": inner.get("name")}
    if inner.get("description") is not None:
        found["description"] = inner["description"]
    parameters = inner.get("parameters", inner.get("input_schema"))
    if parameters is not None:
        found["parameters"] = parameters
    return found


def _url(part: Mapping[str, Any]) -> str:
    if _kind(part) == "uri":
        return str(part.get("uri", ""))
    return (
        f"data:{part.get('mime_type') or 'application/octet-stream'};base64,{part.get('content')}"
    )


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
