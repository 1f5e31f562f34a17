"""The Agent Framework history provider against its own InMemoryHistoryProvider: random
sequences of saves (appends and full-transcript replays, function calls and results) and
loads on both, every load compared, on every backend and surface; the messages read as
the context's, each call paired with its result."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("agent_framework")

from agent_framework import Content, InMemoryHistoryProvider, Message

from ctxstore.adapters.integrations.agent_framework_history import CtxStoreHistoryProvider
from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore

from ..conftest import examples, surface_over

texts = st.sampled_from(["Hi", "Wie spät ist es?", "今何時？", "Который час?", "👋"])


@st.composite
def turn(draw: st.DrawFn) -> list[Message]:
    """A user message, then a reply: text, or a function call and its result first."""
    mid = draw(st.one_of(st.none(), st.builds(lambda: uuid.uuid4().hex)))
    out = [Message("user", [draw(texts)], message_id=mid)]
    if draw(st.booleans()):
        call_id = "c-" + uuid.uuid4().hex[:8]
        out.append(Message("assistant", [Content.from_function_call(
            call_id=call_id, name="time", arguments={"tz": draw(texts)})]))  # fmt: skip
        out.append(
            Message("tool", [Content.from_function_result(call_id=call_id, result=draw(texts))])
        )
    out.append(Message("assistant", [draw(texts)]))
    return out


sessions = st.sampled_from(["s1", "s2"])
steps = st.lists(
    st.one_of(
        st.tuples(st.just("append"), sessions, turn()),
        st.tuples(st.just("replay"), sessions, turn()),  # the whole transcript and a new turn
        st.tuples(st.just("load"), sessions),
    ),
    max_size=8,
)


@pytest.fixture
def backing(store_url: str) -> Any:
    with ContextStore.from_url(store_url, Settings(actor="t")) as s:
        yield s


async def drive(provider: Any, states: dict[str, dict], sequence: list) -> list[Any]:
    seen = []
    for step in sequence:
        name, session = step[0], step[1]
        state = states.setdefault(session, {})
        if name == "load":
            got = await provider.get_messages(session, state=state)
            seen.append([m.to_dict() for m in got])
            continue
        messages = step[2]
        if name == "replay":
            messages = [*await provider.get_messages(session, state=state), *messages]
        await provider.save_messages(session, messages, state=state)
    for session in ("s1", "s2"):
        got = await provider.get_messages(session, state=states.setdefault(session, {}))
        seen.append([m.to_dict() for m in got])
    return seen


@settings(max_examples=examples(30), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(sequence=steps)
def test_saves_and_loads_as_the_in_memory_provider(backing: ContextStore, sequence: list) -> None:
    ours = CtxStoreHistoryProvider(backing, key_prefix=f"af-{uuid.uuid4().hex}:")
    theirs = InMemoryHistoryProvider()
    assert asyncio.run(drive(ours, {}, sequence)) == asyncio.run(drive(theirs, {}, sequence))


@pytest.mark.parametrize("kind", ["store", "async", "http"])
def test_on_every_surface_the_context_reads_as_the_conversation(
    backing: ContextStore, kind: str
) -> None:
    with surface_over(kind, backing) as face:
        provider = CtxStoreHistoryProvider(face)
        call = Content.from_function_call(call_id="c1", name="weather", arguments={"city": "Paris"})
        messages = [
            Message("user", ["Weather in Paris?"]),
            Message("assistant", [call]),
            Message("tool", [Content.from_function_result(call_id="c1", result="21 °C")]),
            Message("assistant", ["Sunny, 21 °C."]),
        ]

        async def case() -> list[Message]:
            await provider.save_messages("s-9", messages)
            await provider.save_messages("s-9", messages)  # a replay: nothing new
            return await provider.get_messages("s-9")

        assert [m.to_dict() for m in asyncio.run(case())] == [m.to_dict() for m in messages]
        reader = backing if kind == "async" else face
        cid = reader.lookup_key("agent-framework:s-9")
        assert cid is not None
        shown = reader.visible(cid).to_openai()
        assert [m["role"] for m in shown] == ["user", "assistant", "tool", "assistant"]
        assert shown[2]["tool_call_id"] == shown[1]["tool_calls"][0]["id"] == "c1"
