"""The LangGraph graph a user of a checkpointer runs: a tool-calling agent on `MessagesState`.

Each turn the user's message goes in; the agent node answers with a tool call (six turns in
ten, as bench/workload.py scripts them), the tool node answers it, and the agent answers in
text. The model is scripted (the turn's own messages), so what is timed is LangGraph with
its checkpointer: four checkpoints and three tasks' writes a turn with a tool call, two and
one without, the messages channel growing by `add_messages` as in every chat agent.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.graph import END, START, MessagesState, StateGraph


class Script:
    """The scripted model: the turn now running, as OpenAI messages (bench/workload.py)."""

    def __init__(self) -> None:
        self.turn: list[dict[str, Any]] = []

    def agent(self, state: MessagesState) -> dict[str, Any]:
        last = state["messages"][-1]
        call = next((m for m in self.turn if m.get("tool_calls")), None)
        if isinstance(last, HumanMessage) and call is not None:
            tc = call["tool_calls"][0]
            return {"messages": [AIMessage(content="", tool_calls=[{
                "id": tc["id"], "name": tc["function"]["name"],
                "args": json.loads(tc["function"]["arguments"]),
            }])]}  # fmt: skip
        return {"messages": [AIMessage(content=self.turn[-1]["content"])]}

    def tools(self, state: MessagesState) -> dict[str, Any]:
        asked = state["messages"][-1]
        assert isinstance(asked, AIMessage)
        result = next(m for m in self.turn if m.get("role") == "tool")
        return {
            "messages": [ToolMessage(result["content"], tool_call_id=asked.tool_calls[0]["id"])]
        }


def route(state: MessagesState) -> str:
    last = state["messages"][-1]
    return "tools" if isinstance(last, AIMessage) and last.tool_calls else END


def agent_graph(saver: Any) -> tuple[Any, Script]:
    """The compiled agent on `saver`, and the script that plays its model."""
    script = Script()
    builder: Any = StateGraph(MessagesState)
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
