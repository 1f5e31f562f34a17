"""A streamed Agents SDK run stored as it streams (`CtxStoreSession.streamed`): each output
item is visible while it streams, finished in place by the SDK's own item (no duplicate), and
kept, abandoned, when the run stops half way."""

from __future__ import annotations

import asyncio
import contextlib
import re
from typing import Any

from agents import Agent, Runner, set_tracing_disabled
from agents.memory import SQLiteSession
from agents.testing import ScriptedModel
from agents.testing.model import ModelStep, _stream_events_for_step
from openai.types.responses import ResponseOutputMessage, ResponseOutputText

from ctxstore.adapters.integrations.agents_session import CtxStoreSession
from ctxstore.adapters.store.reply_stream import StreamPolicy
from ctxstore.domain.streaming import INCOMPLETE

set_tracing_disabled(True)
TEXT = "Sunny and warm, with a light breeze from the west all afternoon."


def answer(text: str = TEXT) -> list[Any]:
    return [ResponseOutputMessage(
        id="msg_a", type="message", role="assistant", status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )]  # fmt: skip


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def paced(text: str = TEXT, pause: float = 0.005) -> ModelStep:
    """The reply streamed as a model streams it: a word at a time, with pauses (the SDK's
    own events for it, its one text delta cut into words)."""
    events = _stream_events_for_step(ModelStep(output=answer(text)), preserve_raw_usage=False)

    async def stream(call: Any) -> Any:
        for e in events:
            if e.type == "response.output_text.delta":
                for word in re.findall(r"\S+\s*", text):
                    await asyncio.sleep(pause)
                    yield e.model_copy(update={"delta": word})
            else:
                await asyncio.sleep(pause)
                yield e

    return ModelStep.stream(stream, output=answer(text))


def test_a_streamed_run_is_stored_as_it_streams_and_matches_the_sdks_session(store):
    session = CtxStoreSession("streamed", store)
    agent = Agent(name="helper", instructions="Help.", model=ScriptedModel([paced()]))
    seen_while_streaming: list[Any] = []

    async def go() -> Any:
        result = Runner.run_streamed(agent, "Weather?", session=session)
        async for event in session.streamed(result.stream_events(), policy=StreamPolicy(0)):
            data = getattr(event, "data", None)
            if (
                getattr(data, "type", None) == "response.output_text.delta"
                and not seen_while_streaming
            ):
                seen_while_streaming.append(store.visible(session.context_id).messages[-1])
        return result

    result = run(go())
    assert result.final_output == TEXT
    mid = seen_while_streaming[len(seen_while_streaming) // 2]
    assert mid.metadata[INCOMPLETE]["state"] == "streaming" and mid.native["id"] == "msg_a"
    assert TEXT.startswith(mid.native["content"][0]["text"]) and mid.native["content"][0]["text"]
    items = run(session.get_items())
    theirs = SQLiteSession("streamed")
    other = Agent(name="helper", instructions="Help.", model=ScriptedModel([answer()]))
    run(Runner.run(other, "Weather?", session=theirs))
    assert items == run(theirs.get_items())  # one copy of the reply, as the SDK stores it
    types = [h.type for h in store.history(session.context_id)]
    assert "begin" in types and "finish" in types and types.count("insert") == 1


def test_items_the_sdk_adds_before_their_events_are_read_are_stored_once(store):
    """An instant model: the SDK's run has added the reply before the caller reads a single
    event of it. Nothing is streamed twice, and nothing is left incomplete."""
    session = CtxStoreSession("instant", store)
    agent = Agent(name="helper", instructions="Help.", model=ScriptedModel([answer()]))

    async def go() -> None:
        result = Runner.run_streamed(agent, "Weather?", session=session)
        async for _ in session.streamed(result.stream_events()):
            pass

    run(go())
    theirs = SQLiteSession("instant")
    run(Runner.run(Agent(name="h", instructions="Help.", model=ScriptedModel([answer()])),
                   "Weather?", session=theirs))  # fmt: skip
    assert run(session.get_items()) == run(theirs.get_items())
    assert not any(INCOMPLETE in m.metadata for m in store.visible(session.context_id).messages)


def test_a_run_stopped_half_way_keeps_what_streamed(store):
    session = CtxStoreSession("stopped", store)
    agent = Agent(name="helper", instructions="Help.", model=ScriptedModel([paced()]))

    async def go() -> None:
        result = Runner.run_streamed(agent, "Weather?", session=session)
        deltas = 0
        async for event in session.streamed(result.stream_events(), policy=StreamPolicy(0)):
            data = getattr(event, "data", None)
            if getattr(data, "type", None) == "response.output_text.delta":
                deltas += 1
                if deltas == 3:
                    raise KeyboardInterrupt  # the user pressed stop

    with contextlib.suppress(KeyboardInterrupt):
        run(go())
    last = store.visible(session.context_id).messages[-1]
    assert last.metadata[INCOMPLETE]["state"] == "abandoned"
    partial = last.native["content"][0]["text"]
    assert partial and TEXT.startswith(partial) and partial != TEXT
    items = run(session.get_items())  # given back repaired: what arrived, marked incomplete
    assert items[-1]["status"] == "incomplete"
    assert (
        items[-1]["content"][0]["text"] == partial.rstrip()
    )  # (the last message: no trailing space)
    # The next run sends it, and the SDK's model accepts the history.
    model = ScriptedModel([answer("Yes, still sunny.")])
    again = run(Runner.run(Agent(name="h", instructions="Help.", model=model), "Still?",
                           session=session))  # fmt: skip
    assert again.final_output == "Yes, still sunny."
