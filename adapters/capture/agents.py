"""OpenAI Agents SDK capture: every model call of a run recorded as the provider received it.

- A run on `CtxStoreSession` records its calls into the session's own context by itself:
  when the SDK reads the session's items at the start of a run, the session binds its
  context (`bind_session`) for the rest of that run.
- Without a ctxstore session: `agents.add_trace_processor(ctxstore.capture.agents(store))`
  binds each trace to a context (`context_for_key(group_id or trace_id)`).

Either way the calls are read at the OpenAI client (adapters/capture/openai_client.py): the
body exactly as sent — the SDK's spans fall short (chat-completions spans carry no tools,
Responses spans the input before the SDK cleans it) — and the reply, a stream assembled
whole, for `OpenAIResponsesModel` and `OpenAIChatCompletionsModel`, streamed or not. A model
that does not send through the OpenAI client (LiteLLM, a custom Model) is recorded by the
trace processor from its response or generation span, marked reconstructed (the span's
input and reply, not the body sent; nothing when the trace keeps no sensitive data).

A binding is tied to the run through context variables, so concurrent runs never mix: a
session's to the run that first calls the model after it (the SDK's model-run owner), so a
later run in the same task without that session is not recorded into it; a trace's to the
trace while it is current. Nothing here raises into the SDK or changes what it sends or gets.
"""

from __future__ import annotations

import json
import logging
import threading
from datetime import datetime
from typing import Any

from ctxstore.domain.errors import MissingExtraError

try:
    from agents.tracing import Span, Trace, TracingProcessor, get_current_trace
    from agents.tracing.span_data import GenerationSpanData, ResponseSpanData
except ModuleNotFoundError as exc:  # the extra is not installed: say which
    raise MissingExtraError("OpenAI Agents SDK capture", "agents") from exc

from ctxstore.adapters.capture import openai_client
from ctxstore.adapters.capture.openai_client import Binding
from ctxstore.adapters.capture.recorder import recorder_for
from ctxstore.adapters.integrations.surface import faces
from ctxstore.domain.captured import CHAT_API, RESPONSES_API, CapturedCall

log = logging.getLogger("ctxstore.capture")

SOURCE = "agents"
_UNCLAIMED, _MISSING = object(), object()


def _run_owner() -> object | None:
    """The SDK's marker of the run a model call belongs to (private: _MISSING without it)."""
    try:
        from agents.models._run_context import get_model_run_owner
    except ImportError:
        return _MISSING
    return get_model_run_owner()


def bind_session(store: Any, context_id: Any, for_version: int | None = None) -> None:
    """The calls of the run that reads a session now go to its context (never raises)."""
    try:
        openai_client.install()
        claimed: list[object] = [_UNCLAIMED]

        def live() -> bool:
            owner = _run_owner()
            if owner is _MISSING:  # (an SDK without the marker: the context alone ties it)
                return True
            if owner is None:  # not a model call of a run (the app's own, a tool's)
                return False
            if claimed[0] is _UNCLAIMED:
                claimed[0] = owner  # the run's first model call claims the binding
            return owner is claimed[0]

        openai_client.bind(Binding(recorder_for(store), context_id, SOURCE, for_version, live))
    except Exception:  # capture must never break the application
        log.exception("capture: an Agents SDK session could not be bound")


class CtxStoreTraceProcessor(TracingProcessor):
    """Records the model calls of each trace into a context per trace (module docstring)."""

    def __init__(self, store: Any) -> None:
        self.recorder = recorder_for(store)
        self._keys = faces(store)[0]  # (contexts are found on the recorder's thread)
        self._targets: dict[str, Any] = {}
        self._lock = threading.Lock()
        openai_client.install()

    def _target(self, trace_id: str) -> Any:
        with self._lock:
            return self._targets.get(trace_id)

    def on_trace_start(self, trace: Trace) -> None:
        try:
            key = getattr(trace, "group_id", None) or trace.trace_id
            name = f"agents trace {getattr(trace, 'name', '') or key}"[:200]

            def target() -> Any:
                return self._keys.context_for_key(key, name=name)

            trace_id = trace.trace_id

            def live() -> bool:
                current = get_current_trace()
                return current is not None and current.trace_id == trace_id

            with self._lock:
                self._targets[trace_id] = target
            openai_client.bind(Binding(self.recorder, target, SOURCE, None, live), trace=True)
        except Exception:
            log.exception("capture: an Agents SDK trace could not be bound")

    def on_trace_end(self, trace: Trace) -> None:
        with self._lock:
            self._targets.pop(trace.trace_id, None)

    def on_span_start(self, span: Span[Any]) -> None:
        pass

    def on_span_end(self, span: Span[Any]) -> None:
        """A model span the client did not capture (another model): rebuilt from the span."""
        try:
            data = span.span_data
            if not isinstance(data, ResponseSpanData | GenerationSpanData):
                return
            if openai_client.captured_in(span.span_id):
                return
            target = self._target(span.trace_id)
            call = span_call(span)
            if target is not None and call is not None:
                self.recorder.submit(target, call)
        except Exception:
            log.exception("capture: an Agents SDK span could not be recorded")

    def shutdown(self) -> None:
        self.recorder.flush(5)

    def force_flush(self) -> None:
        self.recorder.flush(5)


def span_call(span: Span[Any]) -> CapturedCall | None:
    """A model call rebuilt from its span (reconstructed); None without its content."""
    data, error = span.span_data, span.error
    failed = None if error is None else f"{error.get('message')}: {error.get('data') or ''}"
    if isinstance(data, ResponseSpanData):
        response = openai_client.plain(data.response) if data.response is not None else None
        if data.input is None or (response is None and failed is None):
            return None
        request: dict[str, Any] = {"input": data.input}
        for key in ("model", "instructions", "tools", "tool_choice", "temperature", "top_p"):
            if response is not None and response.get(key) is not None:
                request[key] = response[key]
        api = RESPONSES_API
    elif isinstance(data, GenerationSpanData):
        if data.input is None or (data.output is None and failed is None):
            return None
        request = {"model": data.model, "messages": list(data.input),
                   **{k: v for k, v in (data.model_config or {}).items() if v is not None}}  # fmt: skip
        usage = data.usage or {}
        response = None if data.output is None else {
            "object": "chat.completion", "model": data.model,
            "choices": [{"index": n, "message": m} for n, m in enumerate(data.output)],
            "usage": {"prompt_tokens": usage.get("input_tokens", 0),
                      "completion_tokens": usage.get("output_tokens", 0)},
        }  # fmt: skip
        api = CHAT_API
    else:
        return None
    return CapturedCall(
        request=_json(request), response=_json(response), error=failed, api=api,
        source=SOURCE, started_at=_when(span.started_at), reconstructed=True,
    )  # fmt: skip


def _json(value: Any) -> Any:
    return None if value is None else json.loads(json.dumps(value, default=str))


def _when(stamp: str | None) -> datetime | None:
    try:
        return None if stamp is None else datetime.fromisoformat(stamp)
    except ValueError:
        return None


def trace_processor(store: Any) -> CtxStoreTraceProcessor:
    """The trace processor recording each trace's model calls into `store` (any face)."""
    return CtxStoreTraceProcessor(store)
