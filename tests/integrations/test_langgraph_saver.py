"""The LangGraph checkpointer: LangGraph's own conformance suite (langgraph-checkpoint-
conformance, every capability: the base ones and delete_for_runs, copy_thread, prune) on
SQLite and PostgreSQL, and a real StateGraph run compared with LangGraph's InMemorySaver."""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, Any, TypedDict

import pytest

pytest.importorskip("langgraph.checkpoint.conformance")

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.report import ProgressCallbacks
from langgraph.graph import END, START, MessagesState, StateGraph

from ctxstore.adapters.integrations.langgraph_saver import CtxStoreSaver
from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore

from ..conftest import surface_over


def test_langgraphs_conformance_suite_passes_every_capability(durable_url: str) -> None:
    stores: list[ContextStore] = []

    @checkpointer_test(name="CtxStoreSaver")
    async def saver() -> Any:
        store = ContextStore.from_url(durable_url, Settings(actor="t"))
        stores.append(store)
        yield CtxStoreSaver(store, key_prefix=f"lg{len(stores)}:")

    report = asyncio.run(validate(saver, progress=ProgressCallbacks.quiet()))
    for s in stores:
        s.close()
    failures = {cap: r.failures for cap, r in report.results.items() if r.passed is not True}
    assert all(r.detected for r in report.results.values()), "a capability is not offered"
    assert report.passed_all(), (report.conformance_level(), failures)


def _graph(checkpointer: Any) -> Any:
    """A tool-calling agent over a scripted chat model: the same replies every run."""
    replies = [
        AIMessage(content="", id="ai-1", tool_calls=[
            {"id": "call-1", "name": "weather", "args": {"city": "Paris"}}]),
        AIMessage(content="Sunny in Paris, 21 °C.", id="ai-2"),
        AIMessage(content="Berlin: 17 °C, cloudy.", id="ai-3"),
        AIMessage(content="Rome: 25 °C.", id="ai-4"),
    ]  # fmt: skip
    model = FakeMessagesListChatModel(responses=replies)

    def agent(state: MessagesState) -> dict:
        return {"messages": [model.invoke(state["messages"])]}

    def tools(state: MessagesState) -> dict:
        last = state["messages"][-1]
        assert isinstance(last, AIMessage)
        call = last.tool_calls[0]
        return {
            "messages": [ToolMessage(content='{"temp": 21}', tool_call_id=call["id"], id="tool-1")]
        }

    def route(state: MessagesState) -> str:
        return "tools" if getattr(state["messages"][-1], "tool_calls", None) else END

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", tools)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route)
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)


def _run(checkpointer: Any) -> tuple[list[Any], list[Any], list[Any]]:
    graph = _graph(checkpointer)
    config = {"configurable": {"thread_id": "t-1"}}
    graph.invoke({"messages": [HumanMessage("Weather in Paris?", id="h-1")]}, config)
    graph.invoke({"messages": [HumanMessage("And Berlin?", id="h-2")]}, config)
    history = list(graph.get_state_history(config))
    # Edit from an earlier checkpoint (before "And Berlin?" was answered): a branch; the
    # later checkpoints stay readable.
    earlier = next(s for s in history if len(s.values["messages"]) == 4)
    branch = graph.update_state(earlier.config, {"messages": [HumanMessage("And Rome?", id="h-3")]})
    graph.invoke(None, branch)
    final = graph.get_state(config).values["messages"]
    after = list(graph.get_state_history(config))
    return final, [s.values for s in history], [(s.values, s.next) for s in after]


@pytest.mark.parametrize("kind", ["store", "async", "http"])
def test_a_state_graph_runs_as_on_langgraphs_own_saver(durable_url: str, kind: str) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    with (
        ContextStore.from_url(durable_url, Settings(actor="t")) as store,
        surface_over(kind, store) as face,
    ):
        saver = CtxStoreSaver(face)
        ours = _run(saver)
        theirs = _run(InMemorySaver())
        assert ours == theirs
        # The thread's context holds the conversation as messages the store understands.
        reader = store if kind == "async" else face  # (the async store's sync twin: the store)
        cid = reader.lookup_key("langgraph:t-1")
        assert cid is not None
        final = ours[0]
        shown = reader.visible(cid).to_openai()
        assert len(shown) == len(final) and shown[1]["tool_calls"][0]["id"] == "call-1"
        assert [m["content"] for m in shown if m["role"] != "assistant" or m.get("content")] == [
            m.content for m in final if m.content
        ]
        # The messages channel was held as the context's messages at every checkpoint.
        records: list[Any] = [m.metadata["langgraph"] for m in reader.visible(cid).messages
                              if "langgraph" in m.metadata]  # fmt: skip
        held = [
            r["value"][0] for r in records if r["kind"] == "blob" and r["channel"] == "messages"
        ]
        assert held and set(held) == {"ctxstore-messages"}
        # Each checkpoint reads its own messages: the one before the branch still has Berlin.
        assert any(
            [m.content for m in values["messages"]][-1] == "Berlin: 17 °C, cloudy."
            for values, _ in ours[2]
        )


class LogState(TypedDict):
    log: Annotated[list[Any], operator.add]  # LangGraph's default: the whole list, one value


@pytest.mark.parametrize("kind", ["store", "http"])
def test_a_state_larger_than_a_message_may_be_is_kept_in_parts(durable_url: str, kind: str) -> None:
    """A channel whose value outgrows one message's limit (LangGraph's default reducer
    keeps a whole conversation as one value; here plain dicts, which the saver cannot hold
    as the context's messages) is stored in parts and read back whole; pruning the older
    checkpoints deletes every part of their values. (It was refused: LimitExceededError.)"""
    builder: Any = StateGraph(LogState)
    builder.add_node("step", lambda state: {})
    builder.add_edge(START, "step")
    chunk = [{"role": "user", "content": f"{n} " + "x" * 20_000} for n in range(40)]
    settings = Settings(actor="t")  # messages of 1 MB at most
    with (
        ContextStore.from_url(durable_url, settings) as store,
        surface_over(kind, store) as face,
    ):
        saver = CtxStoreSaver(face)
        graph = builder.compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "big"}}
        for _ in range(2):
            graph.invoke({"log": chunk}, config)
        assert graph.get_state(config).values["log"] == chunk * 2  # ~1.6 MB, whole
        fresh = CtxStoreSaver(face)  # nothing cached: read from the context
        assert builder.compile(checkpointer=fresh).get_state(config).values["log"] == chunk * 2
        cid = face.lookup_key("langgraph:big")  # (over HTTP: in the tenant's keys)
        assert cid is not None
        before = len(face.visible(cid).messages)
        fresh.prune(["big"], strategy="keep_latest")
        after = len(face.visible(cid).messages)
        assert after < before
        assert (
            builder.compile(checkpointer=CtxStoreSaver(face)).get_state(config).values["log"]
            == chunk * 2
        )


@pytest.mark.parametrize("kind", ["store", "async", "http"])
def test_a_thread_deleted_and_made_again_elsewhere_is_read_anew(
    durable_url: str, kind: str
) -> None:
    """Two processes (two stores on one database): one reads a thread; the other deletes it
    and runs the thread again, up to the same version, with other words. The first serves
    the new thread, never the erased one it had read (its caches were kept by version)."""
    settings = Settings(actor="t")
    with (
        ContextStore.from_url(durable_url, settings) as one,
        ContextStore.from_url(durable_url, settings) as two,
        surface_over(kind, one) as face_one,
        surface_over(kind, two) as face_two,
    ):
        first, second = CtxStoreSaver(face_one), CtxStoreSaver(face_two)
        config = {"configurable": {"thread_id": "t-1"}}
        ask = "Weather in Paris? My card is 4111 1111 1111 1111"
        _graph(first).invoke({"messages": [HumanMessage(ask, id="h-1")]}, config)
        seen = _graph(first).get_state(config).values["messages"]
        assert seen[0].content == ask
        reader = one if kind == "async" else face_one
        cid = reader.lookup_key("langgraph:t-1")
        assert cid is not None
        version = reader.visible(cid).version
        history = [s.config for s in _graph(first).get_state_history(config)]

        second.delete_thread("t-1")
        _graph(second).invoke({"messages": [HumanMessage("Weather in Lyon?", id="h-1")]}, config)
        assert reader.visible(cid).version == version  # the same id, up to the same version

        again = _graph(first).get_state(config).values["messages"]
        assert again[0].content == "Weather in Lyon?"
        for past in history:  # an erased checkpoint's id is not served either
            state = _graph(first).get_state(past)
            assert all(ask not in str(m.content) for m in state.values.get("messages", []))
