"""LangChain / LangGraph capture (adapters/capture/langchain.py): a real LangGraph graph with
a tool call on `CtxStoreSaver`, ChatOpenAI against the local fake provider, with
`ctxstore.capture.langchain(store)` in the run's callbacks. Each call is recorded in the
thread's own context with the body the provider received (compared key for key), a
stream once and whole, a failed call as failed, and the context's messages are what an
uncaptured run leaves."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

pytest.importorskip("langgraph")
pytest.importorskip("langchain_openai")

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

import ctxstore.capture
from ctxstore.adapters.integrations.langgraph_saver import CtxStoreSaver
from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore

from ..conftest import surface_over
from ..fake_provider import Reply

TRANSPORT = ("stream", "stream_options")  # how the reply travels, not what the model saw


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny in {city}, 21 °C"


def _model(provider: Any, **options: Any) -> ChatOpenAI:
    return ChatOpenAI(
        model="gpt-4o", base_url=provider.url + "/v1", api_key="test", max_retries=0,
        **options,
    )  # fmt: skip


def _agent(model: Any, checkpointer: Any) -> Any:
    """A tool-calling agent: the model, then the tool it asks for, then the model again."""
    bound = model.bind_tools([weather])

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [bound.invoke(state["messages"])]}

    async def aagent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await bound.ainvoke(state["messages"])]}

    from langchain_core.runnables import RunnableLambda

    builder = StateGraph(MessagesState)
    builder.add_node("agent", RunnableLambda(agent, afunc=aagent))
    builder.add_node("tools", ToolNode([weather]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)


def _sent(body: dict[str, Any] | None) -> dict[str, Any]:
    assert body is not None
    return {k: v for k, v in json.loads(json.dumps(body)).items() if k not in TRANSPORT}


def _calls(reader: Any, key: str) -> tuple[Any, list[Any]]:
    """The context of `key` and its recorded calls, bodies and all."""
    cid = reader.lookup_key(key)
    assert cid is not None
    return cid, [reader.call(cid, c.number) for c in reader.calls(cid)]


def _shown(face: Any, cid: Any) -> list[tuple[str, str, list[str]]]:
    """The context's messages as role, text and the tools called (ids differ per run)."""
    return [
        (m["role"], m.get("content") or "",
         [c["function"]["name"] for c in m.get("tool_calls") or []])
        for m in face.visible(cid).to_openai()
    ]  # fmt: skip


@pytest.mark.parametrize("kind", ["store", "async", "http"])
def test_a_graph_on_the_saver_records_each_call_in_the_threads_context(
    durable_url: str, kind: str, fake_provider: Any
) -> None:
    with (
        ContextStore.from_url(durable_url, Settings(actor="t")) as store,
        surface_over(kind, store) as face,
    ):
        reader = store if kind == "async" else face  # (the async store's sync twin)
        graph = _agent(_model(fake_provider), CtxStoreSaver(face))
        question = {"messages": [("user", "Weather in Paris?")]}

        configs: list[Any] = [
            {"configurable": {"thread_id": "plain"}},
            {"configurable": {"thread_id": "captured"},
             "callbacks": [ctxstore.capture.langchain(face)]},
        ]  # fmt: skip
        script = (Reply(tool="weather", arguments={"city": "Paris"}), Reply(text="Sunny, 21 °C."))
        fake_provider.script(*script, *script)

        async def both() -> list[Any]:  # (one loop: the model's async client is bound to it)
            return [await graph.ainvoke(question, config) for config in configs]

        if kind == "async":
            plain, captured = asyncio.run(both())
        else:
            plain, captured = (graph.invoke(question, config) for config in configs)
        assert ctxstore.capture.flush(face, 10)
        assert [m.content for m in captured["messages"]] == [m.content for m in plain["messages"]]

        cid, calls = _calls(reader, "langgraph:captured")
        assert len(calls) == 2
        received = fake_provider.bodies("/chat/completions")[2:]  # the captured run's
        for call, body in zip(calls, received, strict=True):
            assert call.source == "langchain" and call.api == "openai.chat"
            assert not call.failed and not call.streamed
            assert _sent(call.request) == _sent(body)  # key for key, tools and all
            assert call.request["tools"][0]["function"]["name"] == "weather"
            assert (call.prompt_tokens, call.completion_tokens) == (11, 7)
            assert call.model == "gpt-4o"
        last = calls[-1]
        assert [m["role"] for m in received[-1]["messages"]] == ["user", "assistant", "tool"]
        assert last.response_body is not None
        assert last.response_body["choices"][0]["message"]["content"] == "Sunny, 21 °C."
        # Capture wrote no message: the context holds what the uncaptured thread's holds.
        plain_cid, plain_calls = _calls(reader, "langgraph:plain")
        assert plain_calls == []
        assert _shown(reader, cid) == _shown(reader, plain_cid)
        assert len(_shown(reader, cid)) == 4


def test_a_streamed_call_is_recorded_once_whole(durable_url: str, fake_provider: Any) -> None:
    with ContextStore.from_url(durable_url, Settings(actor="t")) as store:
        graph = _agent(_model(fake_provider), CtxStoreSaver(store))
        fake_provider.script(
            Reply(tool="weather", arguments={"city": "Rome"}), Reply(text="Rome: 25 °C, clear.")
        )
        config: Any = {"configurable": {"thread_id": "s-1"},
                       "callbacks": [ctxstore.capture.langchain(store)]}  # fmt: skip
        tokens = [
            chunk.content
            for chunk, _ in graph.stream(
                {"messages": [("user", "Rome?")]}, config, stream_mode="messages"
            )
            if isinstance(chunk.content, str) and chunk.content
        ]
        assert len(tokens) > 2  # streamed piece by piece
        assert ctxstore.capture.flush(store, 10)
        _, calls = _calls(store, "langgraph:s-1")
        received = fake_provider.bodies("/chat/completions")
        assert len(calls) == len(received) == 2 and all(b["stream"] for b in received)
        for call, body in zip(calls, received, strict=True):
            assert call.streamed and _sent(call.request) == _sent(body)
        reply = calls[1].response_body
        assert reply is not None
        assert reply["choices"][0]["message"]["content"] == "Rome: 25 °C, clear."
        tool_call = calls[0].response_body["choices"][0]["message"]["tool_calls"][0]
        assert tool_call["function"]["name"] == "weather"
        assert json.loads(tool_call["function"]["arguments"]) == {"city": "Rome"}
        assert (calls[1].prompt_tokens, calls[1].completion_tokens) == (11, 7)


def test_a_failed_call_is_recorded_as_failed(durable_url: str, fake_provider: Any) -> None:
    with ContextStore.from_url(durable_url, Settings(actor="t")) as store:
        graph = _agent(_model(fake_provider), CtxStoreSaver(store))
        fake_provider.script(Reply(status=500, text="the provider is down"))
        config: Any = {"configurable": {"thread_id": "f-1"},
                       "callbacks": [ctxstore.capture.langchain(store)]}  # fmt: skip
        with pytest.raises(Exception, match="the provider is down"):
            graph.invoke({"messages": [("user", "Hi")]}, config)
        assert ctxstore.capture.flush(store, 10)
        cid, (call,) = _calls(store, "langgraph:f-1")
        assert call.failed and call.response_body is None
        assert call.error is not None and "500" in call.error
        assert _sent(call.request) == _sent(fake_provider.bodies("/chat/completions")[0])
        assert [m["content"] for m in store.visible(cid).to_openai()] == ["Hi"]


def test_calls_land_in_the_saver_context_of_its_own_key_prefix(
    tmp_path: Any, fake_provider: Any
) -> None:
    with ContextStore.from_url(f"sqlite:///{tmp_path}/s.db", Settings(actor="t")) as store:
        graph = _agent(_model(fake_provider), CtxStoreSaver(store, key_prefix="app:"))
        config: Any = {"configurable": {"thread_id": "p-1"},
                       "callbacks": [ctxstore.capture.langchain(store)]}  # fmt: skip
        graph.invoke({"messages": [("user", "Hi")]}, config)
        assert ctxstore.capture.flush(store, 10)
        assert len(_calls(store, "app:p-1")[1]) == 1
        assert store.lookup_key("langgraph:p-1") is None


def test_without_a_saver_calls_go_to_the_thread_or_the_run(
    tmp_path: Any, fake_provider: Any
) -> None:
    with ContextStore.from_url(f"sqlite:///{tmp_path}/s.db", Settings(actor="t")) as store:
        handler = ctxstore.capture.langchain(store)
        # A graph without a checkpointer, given a thread id: a context keyed by the thread.
        graph = _agent(_model(fake_provider), None)
        graph.invoke({"messages": [("user", "Hi")]},
                     {"configurable": {"thread_id": "n-1"}, "callbacks": [handler]})  # fmt: skip
        # A chain: one context per top-level run (its root run id), both calls in it.
        chain = ChatPromptTemplate.from_messages([("system", "Be brief."), ("user", "{q}")])
        model = _model(fake_provider, temperature=0.2)

        def twice(q: dict[str, Any]) -> Any:
            first = (chain | model).invoke(q)
            return model.invoke([("user", q["q"]), first, ("user", "Again?")])

        from langchain_core.runnables import RunnableLambda

        RunnableLambda(twice).invoke({"q": "Hi"}, {"callbacks": [handler]})
        assert ctxstore.capture.flush(store, 10)
        thread, thread_calls = _calls(store, "langgraph:n-1")
        assert len(thread_calls) == 1
        runs = [c for c in store.contexts() if c.context_id != thread]
        assert len(runs) == 1
        root = str(runs[0].name).removeprefix("langchain run ")
        cid, calls = _calls(store, f"langchain:{root}")
        assert cid == runs[0].context_id
        received = fake_provider.bodies("/chat/completions")[1:]
        assert [_sent(c.request) for c in calls] == [_sent(b) for b in received]
        assert calls[0].request["temperature"] == 0.2
        assert calls[0].request["messages"][0] == {"role": "system", "content": "Be brief."}


@pytest.mark.parametrize("flavour", ["responses", "anthropic", "async-stream"])
def test_each_payload_builder_gives_the_body_sent(
    tmp_path: Any, fake_provider: Any, flavour: str
) -> None:
    with ContextStore.from_url(f"sqlite:///{tmp_path}/s.db", Settings(actor="t")) as store:
        config: Any = {"callbacks": [ctxstore.capture.langchain(store)]}
        if flavour == "anthropic":
            from langchain_anthropic import ChatAnthropic

            model: Any = ChatAnthropic(
                model="claude-sonnet-4-5", base_url=fake_provider.url, api_key="test",
                max_retries=0, max_tokens=300,
            ).bind_tools([weather])  # fmt: skip
            path, api = "/messages", "anthropic.messages"
            reply = model.invoke([("system", "Be brief."), ("user", "Hi")], config)
        elif flavour == "responses":
            model = _model(fake_provider, use_responses_api=True).bind_tools([weather])
            path, api = "/responses", "openai.responses"
            reply = model.invoke([("system", "Be brief."), ("user", "Hi")], config)
        else:
            model = _model(fake_provider, stream_usage=True)
            path, api = "/chat/completions", "openai.chat"

            async def streamed() -> str:
                return "".join([str(c.content) async for c in model.astream("Hi", config)])

            reply = AIMessage(asyncio.run(streamed()))
        assert reply.text == "ok"
        assert ctxstore.capture.flush(store, 10)
        (summary,) = store.contexts()
        (listed,) = store.calls(summary.context_id)
        call = store.call(summary.context_id, listed.number)
        (body,) = fake_provider.bodies(path)
        assert call.api == api and _sent(call.request) == _sent(body)
        assert call.streamed == (flavour == "async-stream")
        assert call.response is not None and [m.text() for m in call.response] == ["ok"]
        assert (call.prompt_tokens, call.completion_tokens) == (11, 7)


def test_other_chat_models_are_recorded_as_converted(tmp_path: Any) -> None:
    with ContextStore.from_url(f"sqlite:///{tmp_path}/s.db", Settings(actor="t")) as store:
        model = FakeMessagesListChatModel(responses=[AIMessage("Hello!")])
        model.invoke([("system", "Be kind."), ("user", "Hi")],
                     {"callbacks": [ctxstore.capture.langchain(store)]})  # fmt: skip
        assert ctxstore.capture.flush(store, 10)
        (summary,) = store.contexts()
        (listed,) = store.calls(summary.context_id)
        call: Any = store.call(summary.context_id, listed.number)
        assert call.source == "langchain (converted)"
        sent = [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "Hi"}]
        assert call.request["messages"] == sent
        assert call.response is not None and [m.text() for m in call.response] == ["Hello!"]
