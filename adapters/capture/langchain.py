"""LangChain / LangGraph capture: `config={"callbacks": [ctxstore.capture.langchain(store)]}`
records every chat-model call of the run (`invoke`, `ainvoke`, `stream`, `astream`, a
LangGraph graph's nodes) as the provider received it.

Where a call goes: into the LangGraph thread's context when the run has a `thread_id` —
the very context `CtxStoreSaver` keeps the thread in (`thread_context`, the saver's own
mapping; a saver on the same store with another `key_prefix` is found through the run's
config), else a context keyed `langchain:<root run id>` (one per top-level invocation).
Nothing is inserted into the context: the saver (or the history) writes the messages.

The request body. LangChain's callbacks see the messages and the invocation parameters,
not the body: tools arrive in LangChain's own shape, message conversion (content blocks,
v1 output, tool-call ids, `developer` roles, Azure's and Codex's rewrites) and transport
settings are the model's business. So for ChatOpenAI (and its subclasses: Azure, Codex,
OpenAI-compatible ones) and ChatAnthropic the body is taken from the model's own payload
builder, `_get_request_payload`, at the moment the model calls it to make the request:
the dict it returns is what the model hands to the provider client (`create(**payload)`),
so recording it is recording the body. Rebuilding it from the callback's arguments would
need the model instance (callbacks get only its serialization, without secrets or
clients) and would miss what the model rewrites after the callbacks ran. Wrapping the
openai/anthropic client methods instead would give the same body but collides with
ctxstore's own client capture (adapters/capture/openai_client.py) and sees calls no
LangChain run asked for. The wrapper is installed once per class that defines the
builder, does nothing unless a ctxstore handler is waiting on a run, and finds its run
through the `run_manager` of the method that called it (`_generate`, `_agenerate`,
`_stream`, `_astream` and the Responses variants all hold one): exact, per call, for
batches and concurrent tasks alike. The client's own steps are applied to the copy:
`extra_body` merged into the body; `extra_headers`, `extra_query`, `timeout` and
Anthropic's `betas` (a header) left out.

Other chat models: the request recorded is the call's messages converted to OpenAI's chat
shape with the invocation parameters (model, tools, settings) beside them, marked with
the source `langchain (converted)` and no API: not a body any provider received.

The reply is LangChain's (`on_llm_end`, a stream's merged chunks, so a stream is recorded
once, whole), written back in the API's own shape (a ChatCompletion, a Responses
Response, an Anthropic Message) with the usage the model reported; a failed call
(`on_llm_error`) is recorded as failed with its error. The handler runs inline (no thread
hop on `ainvoke`), only queues (adapters/capture/recorder.py) and never raises.
"""

from __future__ import annotations

import functools
import json
import logging
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from ctxstore.adapters.capture.recorder import CallRecorder, Target, recorder_for
from ctxstore.domain.captured import ANTHROPIC_API, CHAT_API, RESPONSES_API, CapturedCall
from ctxstore.domain.errors import MissingExtraError

try:
    from langchain_core.callbacks import BaseCallbackHandler
    from langchain_core.messages import BaseMessage, convert_to_openai_messages
    from langchain_core.outputs import ChatGeneration, LLMResult
except ModuleNotFoundError as exc:  # the extra is not installed: say which
    raise MissingExtraError("LangChain capture", "langchain") from exc

log = logging.getLogger("ctxstore.capture")

SOURCE = "langchain"
CONVERTED = "langchain (converted)"  # a request rebuilt from the callback, not a body sent
RUN_KEY = "langchain:"  # a run's context key without a thread: the prefix, the root run id
RUN_NAME = "langchain run "  # and its name
DEFAULT_PREFIX = "langgraph:"  # CtxStoreSaver's default key prefix
FRAMES = 6  # callers looked through for the call's run manager
RUNS = 4096  # runs a handler follows at once (the oldest are forgotten past it)
TRANSPORT = ("extra_headers", "extra_query", "extra_body", "timeout", "betas")

# ---- the body, from the model's payload builder -------------------------------------------

_watched: dict[UUID, int] = {}  # runs some handler waits on: how many handlers
_sent: dict[UUID, tuple[str, dict[str, Any]]] = {}  # a run's (api, body), once built
_lock = threading.Lock()


def _watch(run_id: UUID) -> None:
    with _lock:
        _watched[run_id] = _watched.get(run_id, 0) + 1
        while len(_watched) > RUNS * 4:  # runs whose end never came
            _sent.pop(next(iter(_watched)), None)
            _watched.pop(next(iter(_watched)))


def _unwatch(run_id: UUID) -> tuple[str, dict[str, Any]] | None:
    with _lock:
        left = _watched.get(run_id, 0) - 1
        if left > 0:
            _watched[run_id] = left
            return _sent.get(run_id)
        _watched.pop(run_id, None)
        return _sent.pop(run_id, None)


def _noted(api_of: Callable[[dict[str, Any]], str], original: Any) -> Any:
    """`original` (a `_get_request_payload`), noting what it returns for the run of the
    method that called it, when a handler waits on that run."""

    @functools.wraps(original)
    def payload(self: Any, *args: Any, **kwargs: Any) -> Any:
        built = original(self, *args, **kwargs)
        if _watched:
            try:
                run_id = _run_of(sys._getframe(1))
                if run_id is not None and isinstance(built, dict):
                    body = _body(built)
                    with _lock:
                        _sent[run_id] = (api_of(body), body)
            except Exception:
                log.debug("capture: a LangChain request body was not read", exc_info=True)
        return built

    payload.__ctxstore_capture__ = True  # type: ignore[attr-defined]
    return payload


def _run_of(frame: Any) -> UUID | None:
    """The watched run of the nearest caller holding a `run_manager`: `_generate` and its
    kin hold the call's own; `stream()` holds it while `_stream` gets none."""
    for _ in range(FRAMES):
        if frame is None:
            return None
        manager = frame.f_locals.get("run_manager")
        if manager is not None:
            run_id = getattr(manager, "run_id", None)
            return run_id if run_id in _watched else None
        frame = frame.f_back
    return None


def _openai_api(body: dict[str, Any]) -> str:
    return RESPONSES_API if "input" in body and "messages" not in body else CHAT_API


def _anthropic_api(body: dict[str, Any]) -> str:
    return ANTHROPIC_API


_installed: set[type] = set()


def install() -> None:
    """Wrap the payload builder of every ChatOpenAI- and ChatAnthropic-family class loaded
    (each class defining its own, so a subclass's rewrite is in the body); again for
    classes defined since."""
    bases: list[tuple[str, str, Callable[[dict[str, Any]], str]]] = [
        ("langchain_openai.chat_models.base", "BaseChatOpenAI", _openai_api),
        ("langchain_anthropic.chat_models", "ChatAnthropic", _anthropic_api),
    ]
    for module, name, api_of in bases:
        try:
            found = getattr(__import__(module, fromlist=[name]), name)
        except (ImportError, AttributeError):
            continue
        todo = [found]
        while todo:
            cls = todo.pop()
            todo.extend(cls.__subclasses__())
            own = cls.__dict__.get("_get_request_payload")
            if cls in _installed or own is None or getattr(own, "__ctxstore_capture__", False):
                continue
            with _lock:
                if cls not in _installed:
                    cls._get_request_payload = _noted(api_of, own)
                    _installed.add(cls)


def _body(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON body the provider client sends for `payload` (its `create(**payload)`)."""
    body = {k: v for k, v in payload.items() if k not in TRANSPORT and not _omitted(v)}
    extra = payload.get("extra_body")
    if isinstance(extra, Mapping):
        body.update(extra)
    return _object(body)


def _object(value: Mapping[str, Any]) -> dict[str, Any]:
    plain = _plain(value)
    return plain if isinstance(plain, dict) else {}


def _omitted(value: Any) -> bool:
    return type(value).__name__ in ("NotGiven", "Omit")


def _plain(value: Any, depth: int = 0) -> Any:
    """`value` as JSON (the clients' own serialization: models dumped, schemas written)."""
    if depth > 64:
        return str(value)
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, Mapping):
        return {str(k): _plain(v, depth + 1) for k, v in value.items() if not _omitted(v)}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v, depth + 1) for v in value]
    if isinstance(value, type) and hasattr(value, "model_json_schema"):
        try:  # a structured-output class: as the openai client writes it
            from openai.lib._parsing._completions import type_to_response_format_param

            return _plain(type_to_response_format_param(value), depth + 1)
        except Exception:  # noqa: BLE001
            return {"type": "json_schema", "json_schema": {
                "name": value.__name__, "schema": value.model_json_schema()}}  # fmt: skip
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            return _plain(dump(mode="json"), depth + 1)
        except Exception:
            log.debug("capture: a value was not dumped", exc_info=True)
    try:
        return json.loads(json.dumps(value, default=str))
    except (TypeError, ValueError):
        return str(value)


# ---- the reply, in the API's shape --------------------------------------------------------


def _reply(api: str | None, result: LLMResult, request: dict[str, Any]) -> dict[str, Any]:
    """The call's reply as its API answers one, from LangChain's result."""
    generations = result.generations[0] if result.generations else []
    first = generations[0] if generations else None
    message = first.message if isinstance(first, ChatGeneration) else None
    info = (first.generation_info if first is not None else None) or {}
    llm_output = result.llm_output or {}
    meta = dict(getattr(message, "response_metadata", None) or {})
    usage = dict(getattr(message, "usage_metadata", None) or {})
    model = (
        meta.get("model_name") or meta.get("model") or llm_output.get("model_name")
        or request.get("model") or "unknown"
    )  # fmt: skip
    reply_id = meta.get("id") or llm_output.get("id")
    prompt, completion = int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)
    if api == RESPONSES_API:
        return _object({
            "id": reply_id, "object": "response", "model": model,
            "status": meta.get("status") or "completed", "output": _responses_output(message),
            "usage": {"input_tokens": prompt, "output_tokens": completion,
                      "total_tokens": prompt + completion},
        })  # fmt: skip
    if api == ANTHROPIC_API:
        return _object({
            "id": reply_id, "type": "message", "role": "assistant", "model": model,
            "content": _anthropic_content(message),
            "stop_reason": meta.get("stop_reason") or llm_output.get("stop_reason"),
            "usage": {"input_tokens": prompt, "output_tokens": completion},
        })  # fmt: skip
    token_usage = llm_output.get("token_usage")
    return _object({
        "id": reply_id, "object": "chat.completion", "model": model,
        "choices": [{
            "index": 0, "message": _chat_message(api, message, first),
            "finish_reason": info.get("finish_reason") or meta.get("finish_reason"),
        }],
        "usage": token_usage if isinstance(token_usage, dict) and token_usage else {
            "prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion},
    })  # fmt: skip


def _chat_message(api: str | None, message: BaseMessage | None, first: Any) -> Any:
    if message is None:
        return {"role": "assistant", "content": getattr(first, "text", "")}
    if api == CHAT_API:
        try:
            from langchain_openai.chat_models.base import _convert_message_to_dict

            return _convert_message_to_dict(message)
        except Exception:
            log.debug("capture: a reply was not converted", exc_info=True)
    return convert_to_openai_messages(message)


def _responses_output(message: BaseMessage | None) -> list[Any]:
    if message is None:
        return []
    try:
        from langchain_openai.chat_models.base import _construct_responses_api_input

        return [
            {"type": "message", **item} if item.get("role") == "assistant" and "type" not in item
            else item
            for item in _construct_responses_api_input([message])
        ]  # fmt: skip
    except Exception:  # noqa: BLE001 - the text, at least
        return [{"type": "message", "role": "assistant",
                 "content": [{"type": "output_text", "text": message.text, "annotations": []}]}]  # fmt: skip


def _anthropic_content(message: BaseMessage | None) -> list[Any]:
    if message is None:
        return []
    try:
        from langchain_anthropic.chat_models import _format_messages

        _, formatted = _format_messages([message], model=None)
        content = formatted[0]["content"]
        return [{"type": "text", "text": content}] if isinstance(content, str) else content
    except Exception:  # noqa: BLE001 - the text, at least
        return [{"type": "text", "text": message.text}]


def _converted(messages: list[BaseMessage], params: Mapping[str, Any] | None) -> dict[str, Any]:
    """A model without a known payload builder: the messages in OpenAI's chat shape and
    the invocation parameters (model, tools, settings) beside them."""
    given = {k: v for k, v in (params or {}).items() if k != "_type" and v is not None}
    model = given.pop("model", None) or given.pop("model_name", None)
    body = {"model": model, **given, "messages": convert_to_openai_messages(messages)}
    return _object({k: v for k, v in body.items() if v is not None})


# ---- the handler ----------------------------------------------------------------------------


@dataclass
class _Run:
    target: Target
    started_at: datetime
    clock: float
    messages: list[BaseMessage]
    params: Mapping[str, Any] | None
    streamed: bool = False


class CtxStoreCallbackHandler(BaseCallbackHandler):
    """Records each chat-model call of the runs it is given to (see the module)."""

    run_inline = True  # on the caller's thread or loop: it only queues
    raise_error = False

    def __init__(self, store: Any) -> None:
        self.recorder: CallRecorder = recorder_for(store)
        self._runs: OrderedDict[UUID, _Run] = OrderedDict()
        self._roots: OrderedDict[UUID, UUID] = OrderedDict()  # chain run -> its root run
        self._lock = threading.Lock()
        install()

    # ---- where a call goes --------------------------------------------------------------

    def _target(self, run_id: UUID, parent: UUID | None, metadata: Mapping[str, Any]) -> Target:
        thread = metadata.get("thread_id")
        if thread is not None:
            prefix = self._saver_prefix()
            store = self.recorder.store

            def thread_target() -> UUID | str:
                try:
                    from ctxstore.adapters.integrations.langgraph_threads import thread_context
                except (ImportError, MissingExtraError):
                    return prefix + str(thread)
                return thread_context(store, str(thread), key_prefix=prefix)

            return thread_target
        with self._lock:
            root = self._roots.get(parent, parent) if parent is not None else run_id
        store = self.recorder.store
        return lambda: store.context_for_key(f"{RUN_KEY}{root}", name=f"{RUN_NAME}{root}")

    def _saver_prefix(self) -> str:
        """The key prefix of the run's CtxStoreSaver when it is on this store."""
        try:
            from langchain_core.runnables.config import var_child_runnable_config

            config = var_child_runnable_config.get() or {}
            saver = (config.get("configurable") or {}).get("__pregel_checkpointer")
            ours = getattr(saver, "store", None) is self.recorder.store
            if type(saver).__name__ == "CtxStoreSaver" and ours:
                return str(getattr(saver, "prefix", DEFAULT_PREFIX))
        except Exception:
            log.debug("capture: the run's checkpointer was not read", exc_info=True)
        return DEFAULT_PREFIX

    def on_chain_start(
        self, serialized: Any, inputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:  # fmt: skip
        try:
            with self._lock:
                root = self._roots.get(parent_run_id, parent_run_id) if parent_run_id else run_id
                self._roots[run_id] = root or run_id
                if len(self._roots) > RUNS:
                    self._roots.popitem(last=False)
        except Exception:
            log.debug("capture: on_chain_start", exc_info=True)

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        with self._lock:
            self._roots.pop(run_id, None)

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        with self._lock:
            self._roots.pop(run_id, None)

    # ---- the calls -------------------------------------------------------------------

    def on_chat_model_start(
        self, serialized: Any, messages: list[list[BaseMessage]], *, run_id: UUID,
        parent_run_id: UUID | None = None, metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:  # fmt: skip
        try:
            run = _Run(
                target=self._target(run_id, parent_run_id, metadata or {}),
                started_at=datetime.now(UTC), clock=time.monotonic(),
                messages=list(messages[0]) if messages else [],
                params=kwargs.get("invocation_params"),
            )  # fmt: skip
            with self._lock:
                self._runs[run_id] = run
                if len(self._runs) > RUNS:
                    old, _ = self._runs.popitem(last=False)
                    _unwatch(old)
            _watch(run_id)
        except Exception:
            log.warning("capture: a LangChain call was not followed", exc_info=True)

    def on_llm_new_token(self, token: Any, *, run_id: UUID, **kwargs: Any) -> None:
        run = self._runs.get(run_id)
        if run is not None:
            run.streamed = True

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        self._finish(run_id, response, None)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._finish(run_id, None, error)

    def _finish(self, run_id: UUID, result: LLMResult | None, error: BaseException | None) -> None:
        try:
            with self._lock:
                run = self._runs.pop(run_id, None)
            if run is None:
                return
            sent = _unwatch(run_id)
            latency = time.monotonic() - run.clock
            if sent is not None:
                api: str | None
                api, request, source = sent[0], sent[1], SOURCE
            else:
                if result is None and not run.messages:
                    return
                api, request, source = None, _converted(run.messages, run.params), CONVERTED
            streamed = run.streamed or bool(request.get("stream"))
            usage: dict[str, Any] = {}
            response = None
            if result is not None:
                response = _reply(api, result, request)
                first = result.generations[0][0] if result.generations else None
                message = getattr(first, "message", None)
                usage = dict(getattr(message, "usage_metadata", None) or {})
            text = None if error is None else f"{type(error).__name__}: {error}"
            call = CapturedCall(
                request=request, response=response, error=text, api=api, source=source,
                model=str(response.get("model")) if response and response.get("model") not in
                (None, "unknown") else None,
                prompt_tokens=usage.get("input_tokens"), completion_tokens=usage.get("output_tokens"),
                started_at=run.started_at, latency=latency, streamed=streamed,
                call_id=str(run_id),
            )  # fmt: skip
            self.recorder.submit(run.target, call)
        except Exception:
            log.warning("capture: a LangChain call was not recorded", exc_info=True)


def callback_handler(store: Any) -> CtxStoreCallbackHandler:
    """A LangChain callback handler recording every chat-model call into `store` (a store,
    an async store, a client): pass it in `config={"callbacks": [...]}`."""
    return CtxStoreCallbackHandler(store)
