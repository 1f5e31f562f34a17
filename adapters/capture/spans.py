"""ctxstore's own operations as OpenTelemetry spans, shaped as the draft GenAI memory
conventions describe: `gen_ai.operation.name` `update_memory` (insert) or `delete_memory`
(delete, erase), the context id as `gen_ai.memory.store.id`, `ctxstore.operation` naming
the operation, and what it wrote (`ctxstore.context.version`, `ctxstore.messages`). Message
content (`gen_ai.memory.content`) only with OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT.

Spans are made only when the application has configured a tracer provider; with none,
`opentelemetry` is not even imported: each operation costs one dictionary lookup
(`sys.modules`), as `traced` checks whether the application imported it at all.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

OPERATIONS = {"insert": "update_memory", "delete": "delete_memory", "erase": "delete_memory",
              "search": "search_memory"}  # fmt: skip
MAX_CONTENT = 64 * 1024  # characters of content put on a span, when content is captured

_tracer_of: tuple[Any, Any] = (None, None)  # (the provider in force, its tracer or None)


def _tracer() -> Any:
    """The tracer when a real tracer provider is configured, else None (nothing imported)."""
    global _tracer_of
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return None
    provider = trace.get_tracer_provider()
    if provider is _tracer_of[0]:
        return _tracer_of[1]
    name = type(provider).__name__
    tracer = None
    if name not in ("ProxyTracerProvider", "NoOpTracerProvider"):
        from importlib.metadata import PackageNotFoundError, version

        try:
            release = version("ctxstore")
        except PackageNotFoundError:
            release = None
        tracer = provider.get_tracer("ctxstore", release)
    _tracer_of = (provider, tracer)
    return tracer


def _content_captured() -> bool:
    value = os.environ.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "")
    return value.strip().lower() not in ("", "false", "0", "no", "no_content", "none")


def _start(tracer: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    operation = OPERATIONS[name]
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": operation, "gen_ai.memory.type": "conversation",
        "ctxstore.operation": name,
    }  # fmt: skip
    context_id = args[1] if len(args) > 1 else kwargs.get("context_id")
    if context_id is not None:
        attributes["gen_ai.memory.store.id"] = str(context_id)
    url = getattr(args[0], "url", None) if args else None
    if isinstance(url, str) and url.startswith(("sqlite", "postgres")):
        attributes["db.system.name"] = "sqlite" if url.startswith("sqlite") else "postgresql"
    if name == "insert" and _content_captured():
        given = args[2] if len(args) > 2 else kwargs.get("messages")
        try:
            text = json.dumps(given, ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            text = str(given)
        attributes["gen_ai.memory.content"] = text[:MAX_CONTENT]
    return tracer.start_as_current_span(f"{operation} ctxstore", attributes=attributes)


def _finish(span: Any, result: Any) -> None:
    """What the operation wrote: the context's new version, the messages now visible, the
    ids it touched."""
    version = getattr(result, "version", None)
    if isinstance(version, int):
        span.set_attribute("ctxstore.context.version", version)
    visible = getattr(result, "messages", None)
    if isinstance(visible, int) and not isinstance(visible, bool):
        span.set_attribute("ctxstore.messages", visible)
    ids = getattr(result, "ids", None)
    if isinstance(ids, list):
        span.set_attribute("ctxstore.ids", len(ids))


def _wrap(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def run_async(*args: Any, **kwargs: Any) -> Any:
            tracer = _tracer() if "opentelemetry.trace" in sys.modules else None
            if tracer is None:
                return await fn(*args, **kwargs)
            with _start(tracer, name, args, kwargs) as span:
                result = await fn(*args, **kwargs)
                _finish(span, result)
                return result

        return run_async

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        tracer = _tracer() if "opentelemetry.trace" in sys.modules else None
        if tracer is None:
            return fn(*args, **kwargs)
        with _start(tracer, name, args, kwargs) as span:
            result = fn(*args, **kwargs)
            _finish(span, result)
            return result

    return run


def traced(*names: str) -> Callable[[type[T]], type[T]]:
    """A class decorator: the named operations (those the class has) make a span each
    when a tracer provider is configured."""

    def decorate(cls: type[T]) -> type[T]:
        for name in names:
            member = getattr(cls, name, None)
            if name in OPERATIONS and callable(member):
                setattr(cls, name, _wrap(name, member))
        return cls

    return decorate
