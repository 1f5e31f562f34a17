"""LlamaIndex capture: an instrumentation event handler recording every LLM chat call.

    from llama_index.core.instrumentation import get_dispatcher
    get_dispatcher().add_event_handler(ctxstore.capture.llamaindex(store))

What it sees: LlamaIndex's `LLMChatStartEvent` (the messages, the call's keyword
arguments — tools among them for function-calling LLMs —, the model's `to_payload()`)
and `LLMChatEndEvent` (the `ChatResponse`: the message, the provider's raw reply where
the LLM keeps it, token counts); `LLMChatInProgressEvent`s mark a stream, recorded once
when it ends, its text the pieces joined (the tool calls from the last response); a call that raises ends with a
`SpanDropEvent` of its span (or an `ExceptionEvent` for a stream) and is recorded as
failed. A chat inside a chat (a CustomLLM's `achat` calls its `chat`) is the same call,
recorded once. Completion calls (`complete`) of a completion-only LLM emit no chat events and
are not recorded.

What the events cannot see is the body sent, so a call is also watched at the OpenAI python
client (adapters/capture/openai_client.py, installed once when `openai` is importable): the
handler binds the call's context to the LLM's call when it starts — the start event is
handled in the caller's context, which then makes the client call, for `chat`, `achat`,
`stream_chat` and `astream_chat` alike — and unbinds it when the call ends. An LLM that sends
through that client (llama-index-llms-openai's `OpenAI` and `OpenAIResponses`, `OpenAILike`,
`AzureOpenAI`, a CustomLLM using `openai`) is recorded from it: the body exactly as sent and
the reply as received (a stream assembled whole), api `openai.chat` or `openai.responses`,
source `llamaindex` — one record per request the provider got (a retry LlamaIndex makes is
a request of its own), and the events' record is dropped. Any other LLM is recorded from the
events: LlamaIndex's messages before the LLM class converts them for its provider, in
OpenAI's chat shape with the call's arguments beside them and the model named by the LLM —
no API is named (`api` None) and the source is `llamaindex (converted)`. The reply is the
provider's raw reply when the LLM kept one in a provider's shape, else the message written
as a ChatCompletion.

Where a call goes, first found:
- the key given to the handler (`event_handler(store, key="user-1")`);
- the instrument tag `session_id` of the call (`with instrument_tags({"session_id": "user-1"})`):
  both name the context `CtxStoreChatStore` keeps that key's chat in (`llamaindex:<key>`),
  so with the chat store on the same store the calls sit beside the conversation;
- a workflow's run (agents: `FunctionAgent`, `AgentWorkflow`): `llamaindex run:<run id>`;
- else one context for every other call, `llamaindex calls`.
The handler only queues (adapters/capture/recorder.py) and never raises.
"""

from __future__ import annotations

import importlib.util
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ctxstore.adapters.capture.recorder import CallRecorder, Target, recorder_for
from ctxstore.domain.captured import CapturedCall
from ctxstore.domain.errors import MissingExtraError

try:
    from llama_index.core.bridge.pydantic import PrivateAttr
    from llama_index.core.instrumentation.event_handlers import BaseEventHandler
    from llama_index.core.instrumentation.events import BaseEvent
    from llama_index.core.instrumentation.events.exception import ExceptionEvent
    from llama_index.core.instrumentation.events.llm import (
        LLMChatEndEvent,
        LLMChatInProgressEvent,
        LLMChatStartEvent,
    )
    from llama_index_instrumentation.events.span import SpanDropEvent
except ModuleNotFoundError as exc:  # the extra is not installed: say which
    raise MissingExtraError("LlamaIndex capture", "llamaindex") from exc

log = logging.getLogger("ctxstore.capture")

SOURCE = "llamaindex (converted)"  # the messages as LlamaIndex holds them, not a body sent
EXACT_SOURCE = "llamaindex"  # the body as the OpenAI client sent it
KEY_PREFIX = "llamaindex:"  # CtxStoreChatStore's default: a chat key's context
SESSION_TAG = "session_id"
RUN_TAG = "llamaindex.run_id"  # set by llama-index-workflows on every event of a run
RUN_KEY = "llamaindex run:"
DEFAULT_KEY = "llamaindex calls"
CALLS = 4096  # calls followed at once (the oldest are forgotten past it)


# The chat call open in this context: a chat started inside it (CustomLLM's `achat` calls
# `chat`, with the same messages) is the same provider call, recorded once.
_open_call: ContextVar[str | None] = ContextVar("ctxstore_llamaindex_call", default=None)


@dataclass
class _Call:
    target: Target
    request: dict[str, Any]
    started_at: datetime
    clock: float = field(default_factory=time.monotonic)
    streamed: bool = False
    deltas: list[str] = field(default_factory=list)  # a stream's pieces, as they came
    exact: int = 0  # requests the OpenAI client sent for it (each recorded from the client)
    ended: bool = False
    unbind: Callable[[], None] | None = None


class CtxStoreEventHandler(BaseEventHandler):
    """Records LlamaIndex's LLM chat calls into a store (see the module)."""

    key: str | None = None
    _recorder: CallRecorder = PrivateAttr()
    _calls: OrderedDict[str, _Call] = PrivateAttr(default_factory=OrderedDict)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _client: Any = PrivateAttr(default=None)  # openai_client, when `openai` is importable

    def __init__(self, store: Any, *, key: str | None = None) -> None:
        super().__init__(key=key)
        self._recorder = recorder_for(store)
        if importlib.util.find_spec("openai") is not None:
            from ctxstore.adapters.capture import openai_client

            openai_client.install()
            self._client = openai_client

    @classmethod
    def class_name(cls) -> str:
        return "CtxStoreEventHandler"

    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        try:
            if isinstance(event, LLMChatStartEvent):
                self._start(event)
            elif isinstance(event, LLMChatInProgressEvent):
                found = self._calls.get(str(event.span_id))
                if found is not None:
                    found.streamed = True
                    delta = getattr(event.response, "delta", None)
                    if isinstance(delta, str):
                        found.deltas.append(delta)
            elif isinstance(event, LLMChatEndEvent):
                self._end(str(event.span_id), event.response, None)
            elif isinstance(event, SpanDropEvent):
                self._end(str(event.span_id), None, event.err_str)
            elif isinstance(event, ExceptionEvent):
                error = event.exception
                self._end(str(event.span_id), None, f"{type(error).__name__}: {error}")
        except Exception:  # capture never breaks the application
            log.warning("capture: a LlamaIndex call was not recorded", exc_info=True)

    # ---- the calls -------------------------------------------------------------------

    def _start(self, event: LLMChatStartEvent) -> None:
        outer = _open_call.get()
        if outer is not None and outer in self._calls:
            return  # a chat inside a chat (`achat` calling `chat`): one call, the outer's
        _open_call.set(str(event.span_id))
        model = event.model_dict or {}
        request: dict[str, Any] = {
            "model": model.get("model") or model.get("model_name"),
            **{k: v for k, v in (event.additional_kwargs or {}).items() if v is not None},
            "messages": [_message(m) for m in event.messages],
        }
        call = _Call(
            target=self._target(event.tags or {}),
            request=_object({k: v for k, v in request.items() if v is not None}),
            started_at=datetime.now(UTC),
        )
        with self._lock:
            self._calls[str(event.span_id)] = call
            if len(self._calls) > CALLS:
                self._calls.popitem(last=False)
        if self._client is not None:
            self._bind(call)

    def _bind(self, call: _Call) -> None:
        """The OpenAI client's requests made in this context, until the call ends, are
        recorded from the client (the handler runs in the caller's context)."""

        def opened() -> None:
            call.exact += 1

        binding = self._client.Binding(
            self._recorder, call.target, EXACT_SOURCE, live=lambda: not call.ended,
            on_open=opened,
        )  # fmt: skip
        call.unbind = self._client.bind_call(binding)

    def _end(self, span_id: str, response: Any, error: str | None) -> None:
        with self._lock:
            call = self._calls.pop(span_id, None)
        if call is None:
            return
        call.ended = True
        if call.unbind is not None:
            call.unbind()
        if call.exact:
            return  # recorded from the OpenAI client, exactly as sent
        if response is None and error is None:
            error = "the call ended without a response"
        reply, usage = (None, {}) if response is None else _reply(call, response)
        model = None if reply is None else reply.get("model")
        self._recorder.submit(call.target, CapturedCall(
            request=call.request, response=reply, error=error, api=None, source=SOURCE,
            model=str(model) if model else None,
            prompt_tokens=usage.get("prompt"), completion_tokens=usage.get("completion"),
            started_at=call.started_at, latency=time.monotonic() - call.clock,
            streamed=call.streamed,
        ))  # fmt: skip

    def _target(self, tags: dict[str, Any]) -> Target:
        store = self._recorder.store
        key = self.key or tags.get(SESSION_TAG)
        if key is not None:
            name, meta = KEY_PREFIX + str(key), {"llamaindex_key": str(key)}
            return lambda: store.context_for_key(name, name=name, metadata=meta)
        run = tags.get(RUN_TAG)
        if run is not None:
            return lambda: store.context_for_key(RUN_KEY + str(run), name=RUN_KEY + str(run))
        return lambda: store.context_for_key(DEFAULT_KEY, name=DEFAULT_KEY)


def _message(message: Any) -> dict[str, Any]:
    """A LlamaIndex ChatMessage in OpenAI's chat shape (tool calls and results kept)."""
    role = getattr(message.role, "value", message.role)
    found: dict[str, Any] = {"role": str(role), "content": message.content}
    extra = dict(message.additional_kwargs or {})
    if extra.get("tool_calls"):
        found["tool_calls"] = extra["tool_calls"]
    if role == "tool" and extra.get("tool_call_id"):
        found["tool_call_id"] = extra["tool_call_id"]
    return _object(found)


def _reply(call: _Call, response: Any) -> tuple[dict[str, Any], dict[str, int]]:
    """The reply as recorded (the provider's raw one when it reads as one), and the usage."""
    raw = _plain(getattr(response, "raw", None))
    extra = dict(getattr(response, "additional_kwargs", None) or {})
    usage = raw.get("usage") if isinstance(raw, dict) else None
    usage = usage if isinstance(usage, dict) else extra
    counts = {
        name: int(value)
        for name, keys in (("prompt", ("prompt_tokens", "input_tokens")),
                           ("completion", ("completion_tokens", "output_tokens")))
        for value in [next((usage[k] for k in keys if isinstance(usage.get(k), int)), None)]
        if value is not None
    }  # fmt: skip
    if not call.streamed and isinstance(raw, dict) and _provider_reply(raw):
        return raw, counts
    message = {**_message(response.message), "role": "assistant"}
    if call.deltas and "".join(call.deltas):  # a stream: its pieces, whole
        message["content"] = "".join(call.deltas)
    return _object({
        "object": "chat.completion", "model": call.request.get("model"),
        "choices": [{"index": 0, "message": message,
                     "finish_reason": None}],
        **({"usage": {"prompt_tokens": counts["prompt"],
                      "completion_tokens": counts["completion"]}}
           if {"prompt", "completion"} <= counts.keys() else {}),
    }), counts  # fmt: skip


def _provider_reply(raw: dict[str, Any]) -> bool:
    return bool(
        isinstance(raw.get("choices"), list) or raw.get("object") == "response"
        or (raw.get("type") == "message" and raw.get("role") == "assistant")
        or isinstance(raw.get("candidates"), list)
    )  # fmt: skip


def _object(value: dict[str, Any]) -> dict[str, Any]:
    plain = _plain(value)
    return plain if isinstance(plain, dict) else {}


def _plain(value: Any, depth: int = 0) -> Any:
    """`value` as JSON: models dumped, anything else as text."""
    if depth > 64:
        return str(value)
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v, depth + 1) for v in value]
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        try:
            return _plain(dump(mode="json", exclude_unset=True), depth + 1)
        except Exception:  # written as text below
            log.debug("capture: a value was not dumped", exc_info=True)
    return str(getattr(value, "value", value))


def event_handler(store: Any, *, key: str | None = None) -> CtxStoreEventHandler:
    """A LlamaIndex instrumentation event handler recording every LLM chat call into
    `store` (a store, an async store, a client); `key`: one context for all of them (the
    one `CtxStoreChatStore` keeps that chat key in)."""
    return CtxStoreEventHandler(store, key=key)
