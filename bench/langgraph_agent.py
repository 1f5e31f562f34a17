"""The LangGraph graph a user of a checkpointer runs: a tool-calling agent on `MessagesState`.

Each turn the user's message goes in; the agent node answers with a tool call (six turns in
ten, as bench/workload.py scripts them), the tool node answers it, and the agent answers in
text. The model is scripted (the turn's own messages), so what is timed is LangGraph with
its checkpointer: four checkpoints and three tasks' writes a turn with a tool call, two and
one without, the messages channel growing by `add_messages` as in every chat agent.
"""

from __future__ import annotations

import json
import statistics
import time
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.message import add_messages


class Script:
    """The scripted model: the turn now running, as OpenAI messages (bench/workload.py)."""

    def __init__(self) -> None:
        self.turn: list[dict[str, Any]] = []

    def agent(self, state: Any) -> dict[str, Any]:
        last = state["messages"][-1]
        call = next((m for m in self.turn if m.get("tool_calls")), None)
        if isinstance(last, HumanMessage) and call is not None:
            tc = call["tool_calls"][0]
            return {"messages": [AIMessage(content="", tool_calls=[{
                "id": tc["id"], "name": tc["function"]["name"],
                "args": json.loads(tc["function"]["arguments"]),
            }])]}  # fmt: skip
        return {"messages": [AIMessage(content=self.turn[-1]["content"])]}

    def tools(self, state: Any) -> dict[str, Any]:
        asked = state["messages"][-1]
        assert isinstance(asked, AIMessage)
        result = next(m for m in self.turn if m.get("role") == "tool")
        return {
            "messages": [ToolMessage(result["content"], tool_call_id=asked.tool_calls[0]["id"])]
        }


def route(state: Any) -> str:
    last = state["messages"][-1]
    return "tools" if isinstance(last, AIMessage) and last.tool_calls else END


def agent_graph(saver: Any, state: Any = MessagesState) -> tuple[Any, Script]:
    """The compiled agent on `saver`, and the script that plays its model."""
    script = Script()
    builder: Any = StateGraph(state)
    builder.add_node("agent", script.agent)
    builder.add_node("tools", script.tools)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=saver), script


def run_turn(graph: Any, script: Script, turn: list[dict[str, Any]], config: Any) -> None:
    """One user turn through the graph."""
    script.turn = turn
    graph.invoke({"messages": [HumanMessage(turn[0]["content"])]}, config)


def _add_each(left: Any, writes: list[Any]) -> Any:
    """add_messages over a step's writes (a DeltaChannel's reducer takes them all)."""
    for write in writes:
        left = add_messages(left, write)
    return left


class DeltaMessagesState(TypedDict):
    """MessagesState with its channel stored as deltas (LangGraph's DeltaChannel)."""

    messages: Annotated[list[AnyMessage], DeltaChannel(_add_each)]


WINDOWS = (50, 200, 500)  # turns at which the ratios are printed (those the run reaches)


def interleaved(
    savers: dict[str, Any], conversation: list[list[dict[str, Any]]],
    delta: frozenset[str] = frozenset(),
) -> dict[str, list[float]]:  # fmt: skip
    """Seconds per turn of each saver's agent, the savers taking turns (their order
    alternating), so a drift of the machine's speed falls on all alike. Savers named in
    `delta` run the agent whose messages channel is a DeltaChannel. Each saver's thread is
    named by the saver's name (savers may share tables)."""
    graphs = {
        name: agent_graph(saver, DeltaMessagesState if name in delta else MessagesState)
        for name, saver in savers.items()
    }
    times: dict[str, list[float]] = {name: [] for name in savers}
    for n, turn in enumerate(conversation):
        order = list(graphs.items())
        for name, (graph, script) in order if n % 2 else reversed(order):
            started = time.perf_counter()
            run_turn(graph, script, turn, {"configurable": {"thread_id": name}})
            times[name].append(time.perf_counter() - started)
    return times


def ratios(times: dict[str, list[float]], ours: str) -> dict[int, dict[str, float]]:
    """At each window's end: each peer's time over ours (above 1: ctxstore is faster), the
    median of five blocks of the window's last 50 turns (10 turns a block)."""
    found: dict[int, dict[str, float]] = {}
    turns = len(times[ours])
    for end in [w for w in WINDOWS if w <= turns] or [turns]:
        start = max(0, end - 50)
        size = max(1, (end - start) // 5)
        blocks = [(start + i * size, start + (i + 1) * size) for i in range(5)]
        found[end] = {
            name: statistics.median(sum(theirs[a:b]) / sum(times[ours][a:b]) for a, b in blocks)
            for name, theirs in times.items()
            if name != ours
        }
    return found


def report(label: str, times: dict[str, list[float]], ours: str) -> None:
    print(f"\nLangGraph, an agent with a tool call ({label}): ms per turn over the last 50 "
          "turns of each window, and each saver's time over CtxStoreSaver's (median of 5 "
          "blocks; above 1x ctxstore is faster)")  # fmt: skip
    for end, found in ratios(times, ours).items():
        window = slice(max(0, end - 50), end)
        line = f"  at {end} turns: {ours} {statistics.mean(times[ours][window]) * 1e3:.1f} ms"
        for name, ratio in found.items():
            line += f"; {name} {statistics.mean(times[name][window]) * 1e3:.1f} ms = {ratio:.2f}x"
        print(line)
