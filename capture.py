"""What the model saw, recorded with no further code where the SDK allows it.

- OpenAI Agents SDK: a run on `CtxStoreSession` records its model calls into the session's
  context by itself; without one, `agents.add_trace_processor(ctxstore.capture.agents(store))`.
- LangChain / LangGraph: `config={"callbacks": [ctxstore.capture.langchain(store)]}`.
- Google ADK: `Runner(..., plugins=[ctxstore.capture.adk(store)])`.
- LlamaIndex: `get_dispatcher().add_event_handler(ctxstore.capture.llamaindex(store))`.
- Anything instrumented by OpenTelemetry's GenAI instrumentations:
  `OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK=ctxstore` with `CTXSTORE_URL`.

Recording runs off the application's path (adapters/capture/recorder.py): a store that
cannot be reached is logged by the `ctxstore.capture` logger and counted, never raised.
"""

from __future__ import annotations

from typing import Any

from ctxstore.adapters.capture.recorder import CallRecorder, CaptureStats, recorder_for, stats_for
from ctxstore.domain.captured import CapturedCall


def agents(store: Any) -> Any:
    """A trace processor for the OpenAI Agents SDK recording every model call of each trace
    into a context per trace (its `group_id` when set, else the trace id)."""
    from ctxstore.adapters.capture.agents import trace_processor

    return trace_processor(store)


def langchain(store: Any) -> Any:
    """A LangChain callback handler recording every chat-model call."""
    from ctxstore.adapters.capture.langchain import callback_handler

    return callback_handler(store)


def adk(store: Any) -> Any:
    """A Google ADK plugin recording each LlmRequest and LlmResponse."""
    from ctxstore.adapters.capture.adk import plugin

    return plugin(store)


def llamaindex(store: Any, *, key: str | None = None) -> Any:
    """A LlamaIndex instrumentation event handler recording every LLM chat call (`key`:
    one context for all of them, the one `CtxStoreChatStore` keeps that chat key in)."""
    from ctxstore.adapters.capture.llamaindex import event_handler

    return event_handler(store, key=key)


def otel_hook(store: Any = None) -> Any:
    """opentelemetry-util-genai's completion hook recording every instrumented model call
    into `store` (default: the store CTXSTORE_URL names); the entry point `ctxstore` of
    `opentelemetry_genai_completion_hook` makes one by name
    (OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK=ctxstore)."""
    from ctxstore.adapters.capture.otel import CompletionHook

    return CompletionHook(store)


def otel_span_processor(store: Any) -> Any:
    """An OpenTelemetry span processor recording each model-call span's GenAI messages
    (`gen_ai.input.messages`, ...: Pydantic AI, Agent Framework with content capture on)
    into `store`: `tracer_provider.add_span_processor(ctxstore.capture.otel_span_processor(store))`."""
    from ctxstore.adapters.capture.otel import span_processor

    return span_processor(store)


def flush(store: Any, timeout: float | None = None) -> bool:
    """Wait until every call captured for `store` is recorded (at most `timeout` s)."""
    return recorder_for(store).flush(timeout)


def stats(store: Any) -> CaptureStats:
    """What capture did for `store`: calls submitted, recorded, dropped, failed (after
    the store is closed too: what its close gave up is counted there)."""
    return stats_for(store)


__all__ = [
    "CallRecorder", "CaptureStats", "CapturedCall", "adk", "agents", "flush", "langchain",
    "llamaindex", "otel_hook", "otel_span_processor", "stats",
]  # fmt: skip
