"""The LangGraph checkpointer's write path: a checkpoint with its new messages is one event
(one commit), and what it writes reads back exactly when a model call's usage, another
writer or a node editing a message in place comes between; a DeltaChannel's history is
read from the thread natively, as LangGraph's own walk gives it."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, TypedDict

import pytest

pytest.importorskip("langgraph")

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.message import add_messages

from ctxstore.adapters.integrations.langgraph_saver import CtxStoreSaver, thread_context
from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore

from ..conftest import surface_over

CONFIG = {"configurable": {"thread_id": "t-1"}}


def _graph(checkpointer: Any, agent: Any) -> Any:
    builder: Any = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    return builder.compile(checkpointer=checkpointer)


def _answer(state: MessagesState) -> dict[str, Any]:
    return {"messages": [AIMessage(f"answer {len(state['messages'])}")]}


@pytest.mark.parametrize("kind", ["store", "async", "http"])
def test_each_put_and_put_writes_is_one_event(durable_url: str, kind: str) -> None:
    with (
        ContextStore.from_url(durable_url, Settings(actor="t")) as store,
        surface_over(kind, store) as face,
    ):
        saver = CtxStoreSaver(face)
        calls = {"put": 0, "put_writes": 0}
        for name in calls:
            original = getattr(saver, name)

            def counted(*args: Any, _name: str = name, _original: Any = original) -> Any:
                calls[_name] += 1
                return _original(*args)

            setattr(saver, name, counted)
        graph = _graph(saver, _answer)
        graph.invoke({"messages": [HumanMessage("first")]}, CONFIG)
        reader = store if kind == "async" else face
        cid = reader.lookup_key("langgraph:t-1")
        assert cid is not None
        before = reader.visible(cid).version
        calls = dict.fromkeys(calls, 0)
        for n in range(3):
            graph.invoke({"messages": [HumanMessage(f"turn {n}")]}, CONFIG)
        written = reader.visible(cid).version - before
        assert calls["put"] and calls["put_writes"]
        assert written == calls["put"] + calls["put_writes"]  # one event each, no more
        assert [m.content for m in graph.get_state(CONFIG).values["messages"]] == [
            "first", "answer 1", "turn 0", "answer 3", "turn 1", "answer 5", "turn 2",
            "answer 7",
        ]  # fmt: skip


@pytest.mark.parametrize("kind", ["store", "http"])
def test_usage_recorded_during_a_step_leaves_its_checkpoint_readable(
    durable_url: str, kind: str
) -> None:
    """A model call's usage recorded while a step runs (as capture records it) lands between
    the version the saver read and its write: the checkpoint's messages still read back."""
    with (
        ContextStore.from_url(durable_url, Settings(actor="t")) as store,
        surface_over(kind, store) as face,
    ):
        saver = CtxStoreSaver(face)

        def agent(state: MessagesState) -> dict[str, Any]:
            cid = thread_context(face, "t-1")  # where capture records the thread's calls
            face.record_usage(cid, model="gpt-4o", prompt_tokens=10, completion_tokens=2)
            return _answer(state)

        graph = _graph(saver, agent)
        for n in range(3):
            graph.invoke({"messages": [HumanMessage(f"turn {n}")]}, CONFIG)
        expected = ["turn 0", "answer 1", "turn 1", "answer 3", "turn 2", "answer 5"]
        assert [m.content for m in graph.get_state(CONFIG).values["messages"]] == expected
        fresh = _graph(CtxStoreSaver(face), agent)  # nothing cached: read from the context
        assert [m.content for m in fresh.get_state(CONFIG).values["messages"]] == expected
        states = [
            [m.content for m in s.values.get("messages", [])]
            for s in fresh.get_state_history(CONFIG)
        ]
        assert states == [
            expected[:6], expected[:5], expected[:4], expected[:4], expected[:3],
            expected[:2], expected[:2], expected[:1], [],
        ]  # every checkpoint, each with its own messages  # fmt: skip


@pytest.mark.parametrize("kind", ["store", "http"])
def test_another_writer_between_steps_is_read_before_writing(durable_url: str, kind: str) -> None:
    """Two savers (two processes) take turns on one thread: each one's cached thread is
    behind the other's writes, so its write is refused on the version and made on the
    thread read again; both see every message."""
    with (
        ContextStore.from_url(durable_url, Settings(actor="t")) as one,
        ContextStore.from_url(durable_url, Settings(actor="t")) as two,
        surface_over(kind, one) as face_one,
        surface_over(kind, two) as face_two,
    ):
        graphs = [
            _graph(CtxStoreSaver(face_one), _answer),
            _graph(CtxStoreSaver(face_two), _answer),
        ]
        for n in range(4):
            graphs[n % 2].invoke({"messages": [HumanMessage(f"turn {n}")]}, CONFIG)
        expected = [x for n in range(4) for x in (f"turn {n}", f"answer {2 * n + 1}")]
        for graph in graphs:
            assert [m.content for m in graph.get_state(CONFIG).values["messages"]] == expected


def test_a_node_editing_a_message_in_place_is_stored_as_edited(durable_url: str) -> None:
    """A node that changes an earlier message's content in place (and adds one) is stored
    as LangGraph's own saver stores it: the earlier message edited."""

    def agent(state: MessagesState) -> dict[str, Any]:
        if len(state["messages"]) > 2:
            state["messages"][0].content = "edited"
        return _answer(state)

    def run(checkpointer: Any) -> list[Any]:
        graph = _graph(checkpointer, agent)
        for n in range(2):
            graph.invoke({"messages": [HumanMessage(f"turn {n}", id=f"h-{n}")]}, CONFIG)
        return [m.content for m in graph.get_state(CONFIG).values["messages"]]

    with ContextStore.from_url(durable_url, Settings(actor="t")) as store:
        ours = run(CtxStoreSaver(store))
        assert ours == run(InMemorySaver())
        assert ours[0] == "edited"
        fresh = _graph(CtxStoreSaver(store), agent)
        assert [m.content for m in fresh.get_state(CONFIG).values["messages"]] == ours


def _add_each(left: Any, writes: list[Any]) -> Any:
    for write in writes:
        left = add_messages(left, write)
    return left


class DeltaState(TypedDict):
    messages: Annotated[list[AnyMessage], DeltaChannel(_add_each, snapshot_frequency=3)]


@pytest.mark.parametrize("kind", ["store", "http"])
def test_delta_channel_history_is_read_natively_as_langgraphs_walk_gives_it(
    durable_url: str, kind: str
) -> None:
    """get_delta_channel_history (what a DeltaChannel state is rebuilt from) answers what
    LangGraph's own default (a get_tuple per ancestor) answers, at every checkpoint, and a
    DeltaChannel graph reads its state back from a saver that holds nothing yet."""
    with (
        ContextStore.from_url(durable_url, Settings(actor="t")) as store,
        surface_over(kind, store) as face,
    ):
        saver = CtxStoreSaver(face)
        builder: Any = StateGraph(DeltaState)
        builder.add_node("agent", lambda state: _answer(state))
        builder.add_edge(START, "agent")
        builder.add_edge("agent", END)
        graph = builder.compile(checkpointer=saver)
        for n in range(5):
            graph.invoke({"messages": [HumanMessage(f"turn {n}", id=f"h-{n}")]}, CONFIG)
        configs = [s.config for s in graph.get_state_history(CONFIG)]
        assert len(configs) > 10
        for config in configs:
            ours = saver.get_delta_channel_history(config=config, channels=["messages", "none"])
            theirs = BaseCheckpointSaver.get_delta_channel_history(
                saver, config=config, channels=["messages", "none"]
            )
            assert ours == theirs
        mirrored = asyncio.run(
            saver.aget_delta_channel_history(config=configs[0], channels=["messages"])
        )
        assert mirrored == saver.get_delta_channel_history(config=configs[0], channels=["messages"])
        fresh = builder.compile(checkpointer=CtxStoreSaver(face))
        assert [m.content for m in fresh.get_state(CONFIG).values["messages"]] == [
            x for n in range(5) for x in (f"turn {n}", f"answer {2 * n + 1}")
        ]
