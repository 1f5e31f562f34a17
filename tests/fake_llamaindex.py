"""A LlamaIndex chat LLM that sends its messages to a chat-completions endpoint as they are
(the local fake provider in tests, tests/fake_provider.py), its raw reply kept: what a
CustomLLM on the `openai` client does, for the capture tests and bench/bench_capture.py."""

from __future__ import annotations

from typing import Any

from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    ChatResponseAsyncGen,
    ChatResponseGen,
    CompletionResponse,
    CompletionResponseGen,
    LLMMetadata,
)
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.llms import CustomLLM
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback


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

    @llm_chat_callback()
    def stream_chat(self, messages: Any, **kwargs: Any) -> ChatResponseGen:
        sent = [{"role": m.role.value, "content": m.content} for m in messages]

        def gen() -> ChatResponseGen:  # the request is made when the stream is read
            text = ""
            for chunk in self._client.chat.completions.create(
                model=self.model, messages=sent, stream=True, **kwargs
            ):
                delta = (chunk.choices[0].delta.content or "") if chunk.choices else ""
                text += delta
                yield ChatResponse(message=ChatMessage(role="assistant", content=text), delta=delta)

        return gen()

    @llm_chat_callback()
    async def achat(self, messages: Any, **kwargs: Any) -> ChatResponse:
        sent = [{"role": m.role.value, "content": m.content} for m in messages]
        raw = await self._aclient().chat.completions.create(
            model=self.model, messages=sent, **kwargs
        )
        text = raw.choices[0].message.content
        return ChatResponse(message=ChatMessage(role="assistant", content=text), raw=raw)

    @llm_chat_callback()
    async def astream_chat(self, messages: Any, **kwargs: Any) -> ChatResponseAsyncGen:
        sent = [{"role": m.role.value, "content": m.content} for m in messages]
        client = self._aclient()

        async def gen() -> ChatResponseAsyncGen:
            text = ""
            stream = await client.chat.completions.create(
                model=self.model, messages=sent, stream=True, **kwargs
            )
            async for chunk in stream:
                delta = (chunk.choices[0].delta.content or "") if chunk.choices else ""
                text += delta
                yield ChatResponse(message=ChatMessage(role="assistant", content=text), delta=delta)

        return gen()

    def _aclient(self) -> Any:
        import openai

        return openai.AsyncOpenAI(base_url=self.base_url, api_key="test", max_retries=0)

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
