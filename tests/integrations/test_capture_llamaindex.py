"""LlamaIndex capture (adapters/capture/llamaindex.py): an instrumentation event handler on
LlamaIndex's dispatcher recording each LLM chat call. An LLM sending through the OpenAI
python client — llama-index-llms-openai's `OpenAI` and `OpenAIResponses`, a CustomLLM using
`openai` — is recorded from the client, the body exactly as the local fake provider got it
(compared key for key); llama-index-core's MockLLM, which sends nothing, is recorded from
LlamaIndex's events (its messages converted to OpenAI's chat shape)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core.base.llms.types import (
    ChatMessage,
)
from llama_index.core.llms import MockLLM
from llama_index_instrumentation import get_dispatcher
from llama_index_instrumentation.dispatcher import instrument_tags

import ctxstore.capture
from ctxstore.adapters.integrations.llamaindex_chat_store import CtxStoreChatStore
from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore

from ..conftest import surface_over
from ..fake_llamaindex import ProviderLLM
from ..fake_provider import Reply


@pytest.fixture
def capture() -> Iterator[Any]:
    """Adds handlers to LlamaIndex's root dispatcher; takes them away after the test."""
    dispatcher = get_dispatcher()
    added: list[Any] = []

    def add(store: Any, **options: Any) -> Any:
        if options:
            from ctxstore.adapters.capture.llamaindex import event_handler

            handler = event_handler(store, **options)
        else:
            handler = ctxstore.capture.llamaindex(store)
        dispatcher.add_event_handler(handler)
        added.append(handler)
        return handler

    yield add
    for handler in added:
        dispatcher.event_handlers.remove(handler)


TRANSPORT = ("stream", "stream_options")  # how the reply travels, not what the model saw


def _sent(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in json.loads(json.dumps(body)).items() if k not in TRANSPORT}


def _calls(store: Any, key: str) -> list[Any]:
    cid = store.lookup_key(key)
    assert cid is not None, key
    return [store.call(cid, c.number) for c in store.calls(cid)]


@pytest.mark.parametrize("kind", ["store", "http"])
def test_a_chat_is_recorded_beside_the_chat_stores_conversation(
    durable_url: str, kind: str, fake_provider: Any, capture: Any
) -> None:
    with (
        ContextStore.from_url(durable_url, Settings(actor="t")) as store,
        surface_over(kind, store) as face,
    ):
        capture(face)
        chat_store = CtxStoreChatStore(face)
        question = ChatMessage(role="user", content="Weather in Paris?")
        chat_store.add_message("user-1", question)
        llm = ProviderLLM(base_url=fake_provider.url + "/v1")
        fake_provider.script(Reply(text="Sunny, 21 °C."))
        with instrument_tags({"session_id": "user-1"}):
            answer = llm.chat(
                [ChatMessage(role="system", content="Be brief."), question], temperature=0.3
            )
        assert answer.message.content == "Sunny, 21 °C."
        assert ctxstore.capture.flush(face, 10)
        (call,) = _calls(face, "llamaindex:user-1")
        (body,) = fake_provider.bodies("/chat/completions")
        # The CustomLLM sends through the openai client: recorded from it, as sent.
        assert call.source == "llamaindex" and call.api == "openai.chat" and not call.failed
        assert call.request == body
        assert call.request["temperature"] == 0.3
        assert call.response_body["object"] == "chat.completion"  # the provider's raw reply
        assert call.response_body["id"] == "chatcmpl-1"
        assert [m.text() for m in call.response] == ["Sunny, 21 °C."]
        assert (call.prompt_tokens, call.completion_tokens) == (11, 7)
        # Capture wrote no message: the chat store reads what it wrote.
        assert chat_store.get_messages("user-1") == [question]


def test_a_stream_is_recorded_once_whole(durable_url: str, capture: Any) -> None:
    with ContextStore.from_url(durable_url, Settings(actor="t")) as store:
        capture(store, key="s-1")
        llm = MockLLM(max_tokens=4)
        pieces = [r.delta for r in llm.stream_chat([ChatMessage(role="user", content="Hi")])]
        assert len(pieces) == 4
        assert ctxstore.capture.flush(store, 10)
        (call,) = _calls(store, "llamaindex:s-1")
        assert call.streamed and not call.failed
        assert call.request["messages"] == [{"role": "user", "content": "Hi"}]
        assert [m.text() for m in call.response] == ["".join(pieces)]  # the pieces, whole


def test_an_async_chat_is_one_call(durable_url: str, capture: Any) -> None:
    """MockLLM's `achat` calls `chat`: LlamaIndex emits two chat events, one call is made."""
    with ContextStore.from_url(durable_url, Settings(actor="t")) as store:
        capture(store)
        asyncio.run(MockLLM(max_tokens=2).achat([ChatMessage(role="user", content="Hi")]))
        assert ctxstore.capture.flush(store, 10)
        (call,) = _calls(store, "llamaindex calls")
        assert [m.text() for m in call.response] == ["text text"]


def test_a_failed_call_is_recorded_as_failed(
    durable_url: str, fake_provider: Any, capture: Any
) -> None:
    with ContextStore.from_url(durable_url, Settings(actor="t")) as store:
        capture(store, key="f-1")
        fake_provider.script(Reply(status=500, text="the provider is down"))
        llm = ProviderLLM(base_url=fake_provider.url + "/v1")
        with pytest.raises(Exception, match="the provider is down"):
            llm.chat([ChatMessage(role="user", content="Hi")])
        assert ctxstore.capture.flush(store, 10)
        (call,) = _calls(store, "llamaindex:f-1")
        assert call.failed and call.response_body is None
        assert call.error is not None and "the provider is down" in call.error


# ---- llama-index-llms-openai: the body exactly as the OpenAI client sent it ---------------

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def _openai_llm(provider: Any, responses: bool = False, **options: Any) -> Any:
    # (not in the test extra: its openai<3 and openai-agents' openai>=3 cannot both be met)
    llms = pytest.importorskip("llama_index.llms.openai")
    kind = llms.OpenAIResponses if responses else llms.OpenAI
    return kind(api_base=provider.url + "/v1", api_key="x", model="gpt-4o", **options)


def _ask(llm: Any, how: str, messages: list[ChatMessage], **kwargs: Any) -> str:
    """The answer's text, asked the way `how` names (sync or async, streamed or not)."""
    if how == "chat":
        return str(llm.chat(messages, **kwargs).message.content)
    if how == "stream_chat":
        return "".join(r.delta or "" for r in llm.stream_chat(messages, **kwargs))
    if how == "achat":
        return str(asyncio.run(llm.achat(messages, **kwargs)).message.content)

    async def astream() -> str:
        return "".join([r.delta or "" async for r in await llm.astream_chat(messages, **kwargs)])

    return asyncio.run(astream())


@pytest.mark.parametrize("how", ["chat", "stream_chat", "achat", "astream_chat"])
@pytest.mark.parametrize("kind", ["llama-index-llms-openai", "custom"])
def test_an_llm_on_the_openai_client_is_recorded_as_sent(
    durable_url: str, fake_provider: Any, capture: Any, how: str, kind: str
) -> None:
    """The binding made when the chat starts holds where the client call is made: inside
    the call (`chat`, `achat`) or while the returned stream is read (`*stream_chat`)."""
    with ContextStore.from_url(durable_url, Settings(actor="t")) as store:
        capture(store, key="o-1")
        if kind == "custom":
            llm = ProviderLLM(base_url=fake_provider.url + "/v1")
            extra: dict[str, Any] = {"temperature": 0.2}
        else:
            llm, extra = _openai_llm(fake_provider, temperature=0.2), {}
        fake_provider.script(Reply(text="Sunny, 21 °C."))
        messages = [
            ChatMessage(role="system", content="Be brief."),
            ChatMessage(role="user", content="Weather in Paris?"),
        ]
        answer = _ask(llm, how, messages, tools=[WEATHER_TOOL], **extra)
        assert answer == "Sunny, 21 °C."
        assert ctxstore.capture.flush(store, 10)
        (call,) = _calls(store, "llamaindex:o-1")  # once: the events' record gives way
        (body,) = fake_provider.bodies("/chat/completions")
        assert call.source == "llamaindex" and call.api == "openai.chat" and not call.failed
        assert _sent(call.request) == _sent(body)  # key for key, tools and all
        assert body["tools"] == [WEATHER_TOOL] and body["temperature"] == 0.2
        assert call.streamed == ("stream" in how)
        assert [m.text() for m in call.response] == ["Sunny, 21 °C."]
        assert call.model == "gpt-4o"


def test_llamaindex_openai_failed_call_is_recorded_failed(
    durable_url: str, fake_provider: Any, capture: Any
) -> None:
    with ContextStore.from_url(durable_url, Settings(actor="t")) as store:
        capture(store, key="o-f")
        fake_provider.script(Reply(status=500, text="the provider is down"))
        llm = _openai_llm(fake_provider, max_retries=0)
        with pytest.raises(Exception, match="the provider is down"):
            llm.chat([ChatMessage(role="user", content="Hi")])
        assert ctxstore.capture.flush(store, 10)
        (call,) = _calls(store, "llamaindex:o-f")
        (body,) = fake_provider.bodies("/chat/completions")
        assert call.failed and call.response_body is None and call.source == "llamaindex"
        assert call.error is not None and "the provider is down" in call.error
        assert call.request == body


def test_llamaindex_openai_responses_records_the_body_sent(
    durable_url: str, fake_provider: Any, capture: Any
) -> None:
    with ContextStore.from_url(durable_url, Settings(actor="t")) as store:
        capture(store, key="o-r")
        llm = _openai_llm(fake_provider, responses=True)
        fake_provider.script(Reply(text="Sunny."))
        answer = llm.chat([ChatMessage(role="user", content="Weather in Paris?")])
        assert answer.message.content == "Sunny."
        assert ctxstore.capture.flush(store, 10)
        (call,) = _calls(store, "llamaindex:o-r")
        (body,) = fake_provider.bodies("/responses")
        assert call.source == "llamaindex" and call.api == "openai.responses"
        assert _sent(call.request) == _sent(body) and not call.failed


def test_the_binding_ends_with_the_call(durable_url: str, fake_provider: Any, capture: Any) -> None:
    """After a LlamaIndex call, the application's own OpenAI calls are not recorded."""
    import openai

    with ContextStore.from_url(durable_url, Settings(actor="t")) as store:
        capture(store, key="o-b")
        _openai_llm(fake_provider).chat([ChatMessage(role="user", content="Hi")])
        client = openai.OpenAI(base_url=fake_provider.url + "/v1", api_key="x")
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "?"}])
        assert ctxstore.capture.flush(store, 10)
        assert len(fake_provider.bodies("/chat/completions")) == 2
        assert len(_calls(store, "llamaindex:o-b")) == 1
