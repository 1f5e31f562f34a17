"""OpenAI Agents SDK capture (adapters/capture/agents.py, openai_client.py): the real SDK, an
Agent with a tool on OpenAIResponsesModel or OpenAIChatCompletionsModel against the local
fake provider. A run on CtxStoreSession records each model call in the session's own
context with the body the provider received (compared key for key), streamed or not; a
failed call is recorded as failed; the context's messages are what an uncaptured run
leaves; without a session, the trace processor records a trace's calls by its group id."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest

pytest.importorskip("agents")

import agents
from agents import Agent, RunConfig, Runner, function_tool, generation_span, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel
from agents.models.openai_responses import OpenAIResponsesModel
from agents.usage import Usage
from openai import AsyncOpenAI
from openai.types.responses import ResponseOutputMessage, ResponseOutputText

import ctxstore.capture
from ctxstore.adapters.integrations.agents_session import CtxStoreSession
from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore

from ..conftest import surface_over
from ..fake_provider import Reply

TRANSPORT = ("stream", "stream_options")  # how the reply travels, not what the model saw
PATHS = {"responses": "/responses", "chat": "/chat/completions"}


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny in {city}, 21 °C"


@pytest.fixture(autouse=True)
def _no_tracing() -> Any:
    set_tracing_disabled(True)
    yield
    set_tracing_disabled(True)


def _agent(provider: Any, api: str) -> Agent[Any]:
    client = AsyncOpenAI(base_url=provider.url + "/v1", api_key="x", max_retries=0)
    model: Any = (
        OpenAIResponsesModel("gpt-4o", client)
        if api == "responses"
        else OpenAIChatCompletionsModel("gpt-4o", client)
    )
    return Agent(name="weather", instructions="Be brief.", model=model, tools=[weather])


def _sent(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in json.loads(json.dumps(body)).items() if k not in TRANSPORT}


async def _run(agent: Agent[Any], question: str, session: Any, streamed: bool) -> str:
    if not streamed:
        return str((await Runner.run(agent, question, session=session)).final_output)
    result = Runner.run_streamed(agent, question, session=session)
    async for _ in result.stream_events():
        pass
    return str(result.final_output)


def _script(provider: Any) -> None:
    provider.script(Reply(tool="weather", arguments={"city": "Paris"}), Reply(text="Sunny, 21 °C."))


def _shown(face: Any, cid: Any) -> str:
    """The context's messages, the ids the fake provider numbers per reply aside."""
    text = json.dumps(face.visible(cid).to_openai(), sort_keys=True)
    return re.sub(r'"(call|fc|msg|resp|chatcmpl)[_-]\d+"', '"id"', text)


def _text(reply: dict[str, Any], api: str) -> Any:
    if api == "chat":
        return reply["choices"][0]["message"]["content"]
    return reply["output"][0]["content"][0]["text"]


def _tool_call(reply: dict[str, Any], api: str) -> tuple[str, dict[str, Any]]:
    if api == "chat":
        call = reply["choices"][0]["message"]["tool_calls"][0]["function"]
    else:
        call = reply["output"][0]
    return call["name"], json.loads(call["arguments"])


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("api", ["responses", "chat"])
@pytest.mark.parametrize("kind", ["store", "async", "http"])
def test_a_run_on_the_session_records_each_call_in_its_context(
    durable_url: str, kind: str, api: str, streamed: bool, fake_provider: Any
) -> None:
    with (
        ContextStore.from_url(durable_url, Settings(actor="t")) as store,
        surface_over(kind, store) as face,
    ):
        reader = store if kind == "async" else face  # (the async store's sync twin)
        agent = _agent(fake_provider, api)
        plain = CtxStoreSession("plain", face, capture=False)
        captured = CtxStoreSession("captured", face)
        _script(fake_provider)
        _script(fake_provider)

        async def both() -> list[str]:
            return [await _run(agent, "Weather in Paris?", s, streamed) for s in (plain, captured)]

        answers = asyncio.run(both())
        assert answers == ["Sunny, 21 °C.", "Sunny, 21 °C."]
        assert ctxstore.capture.flush(face, 10)

        cid = captured.context_id
        assert reader.calls(plain.context_id) == []
        calls = [reader.call(cid, c.number) for c in reader.calls(cid)]
        received = fake_provider.bodies(PATHS[api])[2:]  # the captured run's
        assert len(calls) == len(received) == 2
        for call, body in zip(calls, received, strict=True):
            assert call.source == "agents" and call.api == f"openai.{api}"
            assert not call.failed and call.streamed == streamed
            assert bool(body.get("stream")) == streamed
            assert call.request is not None
            assert _sent(call.request) == _sent(body)  # key for key, tools and all
            assert call.request["tools"][0]["function" if api == "chat" else "name"]
            assert (call.prompt_tokens, call.completion_tokens) == (11, 7)
            assert call.model == "gpt-4o"
        first, last = (c.response_body for c in calls)
        assert first is not None and last is not None
        assert _tool_call(first, api) == ("weather", {"city": "Paris"})
        assert _text(last, api) == "Sunny, 21 °C."
        # Capture wrote no message: the context holds what the uncaptured session's holds.
        assert _shown(reader, cid) == _shown(reader, plain.context_id)
        assert len(reader.visible(cid).messages) == 4  # the question, call, output, answer


def test_a_failed_call_is_recorded_as_failed(durable_url: str, fake_provider: Any) -> None:
    with ContextStore.from_url(durable_url, Settings(actor="t")) as store:
        session = CtxStoreSession("failing", store)
        fake_provider.script(Reply(status=500, text="the provider is down"))
        with pytest.raises(Exception, match="the provider is down") as raised:
            asyncio.run(Runner.run(_agent(fake_provider, "responses"), "Hi", session=session))
        assert type(raised.value).__name__ == "InternalServerError"  # as the client raised it
        assert ctxstore.capture.flush(store, 10)
        (listed,) = store.calls(session.context_id)
        call = store.call(session.context_id, listed.number)
        assert call.failed and call.response_body is None
        assert call.error is not None and "500" in call.error
        assert call.request is not None
        assert _sent(call.request) == _sent(fake_provider.bodies("/responses")[0])


def test_calls_outside_the_sessions_run_are_not_recorded(tmp_path: Any, fake_provider: Any) -> None:
    """The binding lasts for the run that read the session: the same task's next run
    without the session, and the application's own client calls, are not recorded."""
    with ContextStore.from_url(f"sqlite:///{tmp_path}/s.db", Settings(actor="t")) as store:
        session = CtxStoreSession("once", store)
        agent = _agent(fake_provider, "responses")

        async def runs() -> None:
            await Runner.run(agent, "Hi", session=session)
            await Runner.run(agent, "Hi again")  # no session
            client = AsyncOpenAI(base_url=fake_provider.url + "/v1", api_key="x")
            await client.responses.create(model="gpt-4o", input="direct")

        asyncio.run(runs())
        assert ctxstore.capture.flush(store, 10)
        assert len(fake_provider.bodies("/responses")) == 3
        assert len(store.calls(session.context_id)) == 1


def test_concurrent_runs_record_into_their_own_sessions(tmp_path: Any, fake_provider: Any) -> None:
    with ContextStore.from_url(f"sqlite:///{tmp_path}/s.db", Settings(actor="t")) as store:
        agent = _agent(fake_provider, "chat")
        sessions = [CtxStoreSession(f"c{n}", store) for n in range(4)]

        async def together() -> None:
            await asyncio.gather(
                *(Runner.run(agent, f"Question {n}", session=s) for n, s in enumerate(sessions))
            )

        asyncio.run(together())
        assert ctxstore.capture.flush(store, 10)
        for n, s in enumerate(sessions):
            (listed,) = store.calls(s.context_id)
            call = store.call(s.context_id, listed.number)
            assert call.request is not None
            assert call.request["messages"][-1]["content"] == f"Question {n}"


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_the_trace_processor_records_a_traces_calls_by_its_group_id(
    durable_url: str, streamed: bool, fake_provider: Any
) -> None:
    with ContextStore.from_url(durable_url, Settings(actor="t")) as store:
        processor = ctxstore.capture.agents(store)
        provider = agents.tracing.get_trace_provider()
        # (the SDK's exporter: offline; _multi_processor is private, not on TraceProvider's type)
        before = list(getattr(provider, "_multi_processor")._processors)  # noqa: B009
        agents.set_trace_processors([processor])
        set_tracing_disabled(False)
        try:
            agent = _agent(fake_provider, "chat")
            _script(fake_provider)
            config = RunConfig(group_id="conversation-7")
            fake_provider.script(Reply(text="Hello."))

            async def runs() -> None:
                if streamed:
                    result = Runner.run_streamed(agent, "Weather in Paris?", run_config=config)
                    async for _ in result.stream_events():
                        pass
                else:
                    await Runner.run(agent, "Weather in Paris?", run_config=config)
                await Runner.run(agent, "Hi")  # no group: a context keyed by the trace id

            asyncio.run(runs())
        finally:
            set_tracing_disabled(True)
            agents.set_trace_processors(before)
        assert ctxstore.capture.flush(store, 10)
        cid = store.lookup_key("conversation-7")
        assert cid is not None
        calls = [store.call(cid, c.number) for c in store.calls(cid)]
        received = fake_provider.bodies("/chat/completions")
        assert len(calls) == 2 and len(received) == 3
        for call, body in zip(calls, received[:2], strict=True):
            assert call.source == "agents" and call.streamed == streamed
            assert call.request is not None
            assert _sent(call.request) == _sent(body)
            assert call.request["tools"][0]["function"]["name"] == "weather"
        others = [c.context_id for c in store.contexts() if c.context_id != cid]
        (other,) = [c for c in others if store.calls(c)]
        (listed,) = store.calls(other)
        assert store.call(other, listed.number).request == received[2]


class SpannedModel(Model):
    """A model that does not send through the OpenAI client (as LiteLLM's): it reports its
    call in a generation span, which is all the trace processor can read of it."""

    async def get_response(self, system_instructions: Any, input: Any, *args: Any,
                           **kwargs: Any) -> ModelResponse:  # fmt: skip
        with generation_span(model="other-model", model_config={"temperature": 0.2}) as span:
            given = [{"role": "user", "content": input}] if isinstance(input, str) else input
            span.span_data.input = [{"role": "system", "content": system_instructions}, *given]
            span.span_data.output = [{"role": "assistant", "content": "Hello."}]
            span.span_data.usage = {"input_tokens": 5, "output_tokens": 2}
            out = ResponseOutputMessage(
                id="msg_1", type="message", role="assistant", status="completed",
                content=[ResponseOutputText(type="output_text", text="Hello.", annotations=[])],
            )  # fmt: skip
            return ModelResponse(output=[out], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover
        raise NotImplementedError


def test_a_model_without_the_openai_client_is_rebuilt_from_its_span(tmp_path: Any) -> None:
    with ContextStore.from_url(f"sqlite:///{tmp_path}/s.db", Settings(actor="t")) as store:
        # (_multi_processor is private, not on TraceProvider's type)
        provider = agents.tracing.get_trace_provider()
        before = list(getattr(provider, "_multi_processor")._processors)  # noqa: B009
        agents.set_trace_processors([ctxstore.capture.agents(store)])
        set_tracing_disabled(False)
        try:
            agent = Agent(name="other", instructions="Be brief.", model=SpannedModel())
            config = RunConfig(group_id="other-1")
            asyncio.run(Runner.run(agent, "Hi", run_config=config))
        finally:
            set_tracing_disabled(True)
            agents.set_trace_processors(before)
        assert ctxstore.capture.flush(store, 10)
        cid = store.lookup_key("other-1")
        assert cid is not None
        (listed,) = store.calls(cid)
        call = store.call(cid, listed.number)
        assert call.reconstructed and call.api == "openai.chat" and not call.failed
        assert call.request == {"model": "other-model", "temperature": 0.2, "messages": [
            {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]}  # fmt: skip
        assert call.response_body is not None
        assert call.response_body["choices"][0]["message"]["content"] == "Hello."
        assert (call.prompt_tokens, call.completion_tokens) == (5, 2)
