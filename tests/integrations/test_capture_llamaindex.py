"""LlamaIndex capture (adapters/capture/llamaindex.py): an instrumentation event handler on
LlamaIndex's dispatcher recording each LLM chat call. llama-index-llms-openai is not
installed, so the LLM here is a CustomLLM that sends its messages to the local fake
provider with the openai client (its raw reply kept, as llama-index-llms-openai keeps it),
and llama-index-core's MockLLM for streams; the events carry LlamaIndex's messages, not the
body, so the recorded request is those messages (compared with what the provider got)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    CompletionResponse,
    CompletionResponseGen,
    LLMMetadata,
)
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.llms import CustomLLM, MockLLM
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
from llama_index_instrumentation import get_dispatcher
from llama_index_instrumentation.dispatcher import instrument_tags

import ctxstore.capture
from ctxstore.adapters.integrations.llamaindex_chat_store import CtxStoreChatStore
from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore

from ..conftest import surface_over
from ..fake_provider import Reply


class ProviderLLM(CustomLLM):
    """A chat LLM that sends its messages to a chat-completions endpoint as they are."""

    base_url: str
    model: str = "gpt-4o"
    _client: Any = PrivateAttr()

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        import openai

        self._client = openai.OpenAI(base_url=self.base_url, api_key="test", max_retries=0)

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name=self.model, is_chat_model=True)

    @llm_chat_callback()
    def chat(self, messages: Any, **kwargs: Any) -> ChatResponse:
        sent = [{"role": m.role.value, "content": m.content} for m in messages]
        raw = self._client.chat.completions.create(model=self.model, messages=sent, **kwargs)
        text = raw.choices[0].message.content
        return ChatResponse(message=ChatMessage(role="assistant", content=text), raw=raw)

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(
            text=self.chat([ChatMessage(role="user", content=prompt)]).message.content or ""
        )

    @llm_completion_callback()
    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        raise NotImplementedError


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
        assert call.source == "llamaindex (converted)" and not call.failed
        assert call.request["messages"] == body["messages"]
        assert call.request["model"] == body["model"] == "gpt-4o"
        assert call.request["temperature"] == body["temperature"] == 0.3
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
