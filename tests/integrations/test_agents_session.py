"""CtxStoreSession behaves as the Agents SDK's own SQLiteSession, on every backend."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from types import SimpleNamespace
from typing import Any

import pytest
from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.items import ModelResponse
from agents.memory import SessionSettings, SQLiteSession
from agents.memory.openai_responses_compaction_session import OpenAIResponsesCompactionSession
from agents.models.interface import Model
from agents.usage import Usage
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from ctxstore.adapters.integrations.agents_session import CtxStoreSession
from ctxstore.adapters.store.facade import ContextStore

from ..conftest import examples

set_tracing_disabled(True)

ITEMS: list[dict[str, Any]] = [
    {"role": "user", "content": "What's the weather in Paris?"},
    {"role": "system", "content": "Be brief."},
    {
        "type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
        "content": [{"type": "output_text", "text": "Let me check.", "annotations": []}],
    },
    {
        "type": "function_call", "call_id": "call_1", "name": "weather",
        "arguments": json.dumps({"city": "Paris"}), "id": "fc_1", "status": "completed",
    },
    {"type": "function_call_output", "call_id": "call_1", "output": "22°C, sunny"},
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "hm"}]},
    {"role": "user", "content": [{"type": "input_text", "text": "上海呢？天气怎么样"}]},
    {"role": "assistant", "content": "", "extra": {"nested": [1, 2.5, None, True, "ü"]}},
]  # fmt: skip


def run(coro):
    return asyncio.run(coro)


@pytest.fixture
def store(store_url):
    with ContextStore.from_url(store_url) as s:
        yield s


Ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.lists(st.sampled_from(range(len(ITEMS))), max_size=4)),
        st.tuples(st.just("get"), st.one_of(st.none(), st.integers(-2, 12))),
        st.tuples(st.just("pop"), st.none()),
        st.tuples(st.just("clear"), st.none()),
    ),
    max_size=14,
)


@settings(
    max_examples=examples(15),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(ops=Ops, n=st.integers(0, 10**9))
def test_same_answers_as_the_sdks_sqlite_session(store, ops, n):
    key = uuid.uuid4().hex  # a fresh session each example, replays and shrinks included
    ours = CtxStoreSession(f"s-{key}", store)
    theirs = SQLiteSession(f"s-{key}")

    async def both(op, arg):
        if op == "add":
            batch = [ITEMS[i] for i in arg]
            await ours.add_items(batch)
            await theirs.add_items(batch)
            return None, None
        if op == "get":
            return await ours.get_items(arg), await theirs.get_items(arg)
        if op == "pop":
            return await ours.pop_item(), await theirs.pop_item()
        await ours.clear_session()
        await theirs.clear_session()
        return None, None

    for op, arg in ops:
        a, b = run(both(op, arg))
        assert a == b, (op, arg)
    assert run(ours.get_items()) == run(theirs.get_items())


def test_items_round_trip_exactly_and_sessions_are_isolated(store):
    a, b = CtxStoreSession("alpha", store), CtxStoreSession("beta", store)
    run(a.add_items(ITEMS))
    run(b.add_items(ITEMS[:1]))
    got = run(a.get_items())
    assert json.dumps(got, sort_keys=True) == json.dumps(ITEMS, sort_keys=True)
    assert run(b.get_items()) == ITEMS[:1]
    assert run(a.get_items(limit=3)) == ITEMS[-3:]
    # A new object on the same session id (another process, later) finds the same history.
    assert run(CtxStoreSession("alpha", store).get_items()) == ITEMS
    assert run(a.pop_item()) == ITEMS[-1]
    run(a.clear_session())
    assert run(a.get_items()) == [] and run(a.pop_item()) is None
    assert run(b.get_items()) == ITEMS[:1]
    types = [h.type for h in store.history(a.context_id)]
    assert types == ["create", "insert", "delete", "delete"]  # every change is audited


def test_concurrent_adds_lose_nothing(store):
    def adder(n: int) -> None:
        session = CtxStoreSession("shared", store)
        for i in range(15):
            run(session.add_items([{"role": "user", "content": f"{n}:{i}"}]))

    threads = [threading.Thread(target=adder, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    items = run(CtxStoreSession("shared", store).get_items())
    assert sorted(i["content"] for i in items) == sorted(
        f"{n}:{i}" for n in range(6) for i in range(15)
    )
    for n in range(6):  # each writer's items in its own order
        mine = [i["content"] for i in items if i["content"].startswith(f"{n}:")]
        assert mine == [f"{n}:{i}" for i in range(15)]


class ScriptedModel(Model):
    """Calls the weather tool once, then answers; remembers what it was given."""

    def __init__(self) -> None:
        self.inputs: list[Any] = []

    async def get_response(self, system_instructions, input, model_settings, tools,
                           output_schema, handoffs, tracing, **_: Any) -> ModelResponse:  # fmt: skip
        self.inputs.append(input)
        tool_done = (
            isinstance(input, list) and input and input[-1].get("type") == "function_call_output"
        )
        if not tool_done:
            call_id = f"call_{len(self.inputs)}"
            out: list[Any] = [ResponseFunctionToolCall(
                type="function_call", call_id=call_id, name="weather",
                arguments='{"city": "Paris"}', id=f"fc_{len(self.inputs)}", status="completed",
            )]  # fmt: skip
        else:
            out = [ResponseOutputMessage(
                id=f"msg_{len(self.inputs)}", type="message", role="assistant", status="completed",
                content=[ResponseOutputText(type="output_text", text="Sunny.", annotations=[])],
            )]  # fmt: skip
        return ModelResponse(output=out, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any):  # pragma: no cover - not used
        raise NotImplementedError


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"22°C in {city}"


def test_the_sdks_runner_works_unchanged(store):
    model = ScriptedModel()
    agent = Agent(name="helper", instructions="Help.", model=model, tools=[weather])
    session = CtxStoreSession("run-1", store)
    first = run(Runner.run(agent, "Weather in Paris?", session=session))
    assert first.final_output == "Sunny."
    second = run(Runner.run(agent, "And tomorrow?", session=session))
    assert second.final_output == "Sunny."
    items = run(session.get_items())
    kinds = [i.get("type", "message") for i in items]
    assert kinds.count("function_call") == 2 and kinds.count("function_call_output") == 2
    # The second run's first model call saw the whole first run from the session.
    seen = model.inputs[2]
    assert [i.get("content") for i in seen if i.get("role") == "user"] == [
        "Weather in Paris?",
        "And tomorrow?",
    ]
    # And the same run on the SDK's own SQLite session stores the same items.
    theirs = SQLiteSession("run-1")
    model2 = ScriptedModel()
    agent2 = Agent(name="helper", instructions="Help.", model=model2, tools=[weather])
    run(Runner.run(agent2, "Weather in Paris?", session=theirs))
    run(Runner.run(agent2, "And tomorrow?", session=theirs))
    assert run(theirs.get_items()) == items


class FakeCompactClient:
    def __init__(self, output: list[dict[str, Any]]) -> None:
        self.seen: list[Any] = []

        async def compact(**kwargs: Any) -> Any:
            self.seen.append(kwargs)
            return SimpleNamespace(output=output, usage=None)

        self.responses = SimpleNamespace(compact=compact)


def test_sdk_compaction_is_recorded_as_one_compress_event(store):
    inner = CtxStoreSession("compacted", store)
    run(inner.add_items(ITEMS))
    output = [
        {"type": "compaction", "id": "cmp_1", "encrypted_content": "opaque"},
        {"role": "user", "content": "What's the weather in Paris?"},
    ]
    client = FakeCompactClient(output)
    wrapped = OpenAIResponsesCompactionSession(
        "compacted",
        inner,
        client=client,
        compaction_mode="input",
    )
    before = store.visible(inner.context_id).version
    run(wrapped.run_compaction({"force": True}))
    assert client.seen, "the compaction API was called"
    history = store.history(inner.context_id)
    assert [h.type for h in history if h.version > before] == ["compress"]
    got = run(inner.get_items())
    assert [i.get("type") for i in got][:1] == ["compaction"] and len(got) == len(output)
    # The items before compaction are still in the event log: replay shows them.
    assert len(store.visible(inner.context_id, at_version=before).messages) == len(ITEMS)
    # pop takes the newest item out of the summary, as with any other backend.
    assert run(inner.pop_item()) == got[-1]
    assert run(inner.get_items()) == got[:-1]


def test_items_are_native_responses_items_and_older_records_still_read(store):
    """An item is stored once, as a native Responses item (tool outputs stay outputs,
    reasoning stays reasoning); a record written before that, a chat message holding the
    whole item in its metadata, reads back the same."""
    session = CtxStoreSession("kept-once", store)
    item = {"role": "user", "content": "所有的文字 only once", "extra": {"n": 1}}
    run(session.add_items([item]))
    stored = store.visible(session.context_id).messages[-1]
    assert stored.format == "openai-responses" and stored.native == item
    assert "所有的文字" not in json.dumps(stored.metadata, ensure_ascii=False)
    older = {"role": "assistant", "content": "written by an older release"}
    store.insert(session.context_id, {"role": "assistant", "content": older["content"],
                                      "metadata": {"agents_item": older}})  # fmt: skip
    assert run(session.get_items()) == [item, older]
    assert [list(i) for i in run(session.get_items())] == [list(item), list(older)]  # key order
    assert run(session.pop_item()) == older and run(session.pop_item()) == item


class ResponseModel(ScriptedModel):
    """ScriptedModel answering with response ids, which automatic compaction needs."""

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        response = await super().get_response(*args, **kwargs)
        response.response_id = f"resp_{len(self.inputs)}"
        return response


async def three_runs_compacting_the_last(inner: Any) -> tuple[list[Any], int]:
    """Three runs that each load only the newest 4 items; compaction is approved after the
    third, whose model exchange covers only a suffix of the stored history."""
    approve: list[bool] = []
    client: Any = FakeCompactClient([
        {"type": "compaction", "id": "cmp_1", "encrypted_content": "opaque"},
        {"role": "user", "content": "kept"},
    ])  # fmt: skip
    wrapped = OpenAIResponsesCompactionSession(
        inner.session_id, inner, client=client, compaction_mode="input",
        should_trigger_compaction=lambda _: bool(approve),
    )  # fmt: skip
    agent = Agent(name="helper", instructions="Help.", model=ResponseModel(), tools=[weather])
    for question in ("Weather in Paris?", "And tomorrow?", "And on Sunday?"):
        if question == "And on Sunday?":
            approve.append(True)
        await Runner.run(agent, question, session=wrapped)
    return await inner.get_items(limit=100), len(client.seen)


def test_automatic_compaction_of_a_suffix_as_the_sdks_sqlite_session(store, tmp_path):
    """Runs loading a bounded history get their suffix compacted (before, ctxstore's
    session had no snapshot and the SDK skipped the compaction, keeping everything)."""
    limited = SessionSettings(limit=4)
    theirs = SQLiteSession("suffix", str(tmp_path / "sdk.db"), session_settings=limited)
    expected, their_calls = run(three_runs_compacting_the_last(theirs))
    ours = CtxStoreSession("suffix", store, session_settings=limited)
    got, our_calls = run(three_runs_compacting_the_last(ours))
    assert their_calls == our_calls == 1
    assert got == expected
    assert [i.get("type") for i in got][-2:] == ["compaction", None]  # the two runs before kept
    assert [h.type for h in store.history(ours.context_id)][-1] == "compress"


def test_compaction_snapshot_replaces_a_suffix_only_if_nothing_changed(store):
    session = CtxStoreSession("snap", store)
    run(session.add_items(ITEMS[:3]))
    run(session._atomic_replace_items([ITEMS[0], ITEMS[1]]))  # one message, two items
    run(session.add_items([ITEMS[4], ITEMS[6]]))
    snapshot = run(session._get_compaction_snapshot(3))
    assert snapshot.items == [ITEMS[1], ITEMS[4], ITEMS[6]] and not snapshot.complete
    assert run(snapshot.replace_suffix(3, [ITEMS[7]])) is False  # nothing there to replace
    # From the summary's second item on: its first item stays, in a summary with the output.
    assert run(snapshot.replace_suffix(0, [ITEMS[7]])) is True
    assert run(session.get_items()) == [ITEMS[0], ITEMS[7]]
    assert run(session._get_compaction_snapshot(10)).complete
    stale = run(session._get_compaction_snapshot(1))
    run(session.add_items([ITEMS[2]]))
    assert run(stale.replace_suffix(0, [])) is False  # the session changed since the read
    assert run(session.get_items()) == [ITEMS[0], ITEMS[7], ITEMS[2]]
    fresh = run(session._get_compaction_snapshot(1))
    assert run(fresh.replace_suffix(0, [])) is True  # no items left: a delete
    assert run(session.get_items()) == [ITEMS[0], ITEMS[7]]


def test_compaction_snapshot_hides_an_expired_prefix(store):
    session = CtxStoreSession("expiring", store)
    old = [{"role": "user", "content": f"old {i}"} for i in range(3)]
    run(session.add_items(old[:2]))
    run(session.add_items([old[2], ITEMS[0]]))  # one add, two messages: old 2 then new
    run(session.add_items([ITEMS[1]]))
    snapshot = run(session._get_compaction_snapshot(1, prune_prefix=lambda i: i in old))
    assert run(snapshot.replace_suffix(0, [ITEMS[7]])) is True
    assert run(session.get_items()) == [ITEMS[0], ITEMS[7]]


def test_the_sdks_encrypted_session_compacts_and_drops_its_expired_prefix(store):
    """The SDK's EncryptedSession over ctxstore: its snapshot asks to hide expired items
    (encrypted over a minute before, against a TTL of one) and replaces a suffix."""
    from agents.extensions.memory.encrypt_session import EncryptedSession

    inner = CtxStoreSession("encrypted", store)
    encrypted = EncryptedSession("encrypted", inner, encryption_key="k" * 32, ttl=1)
    cipher = encrypted.cipher
    fresh_encrypt = cipher.encrypt
    cipher.encrypt = lambda data: cipher.encrypt_at_time(data, int(time.time()) - 100)
    run(encrypted.add_items([{"role": "user", "content": f"old {i}"} for i in range(3)]))
    cipher.encrypt = fresh_encrypt
    new = [{"role": "user", "content": "new 1"}, {"role": "assistant", "content": "new 2"}]
    run(encrypted.add_items(new))
    assert run(encrypted.get_items()) == new
    snapshot = run(encrypted._get_compaction_snapshot(2))
    assert snapshot is not None and snapshot.items == new
    compacted = {"role": "assistant", "content": "compacted"}
    assert run(snapshot.replace_suffix(1, [compacted])) is True
    assert run(encrypted.get_items()) == [new[0], compacted]
    assert len(store.visible(inner.context_id).messages) == 2  # the expired three hidden
    assert [h.type for h in store.history(inner.context_id)][-2:] == ["compress", "delete"]


def test_no_compaction_snapshot_or_atomic_replace_for_a_subclass_hooking_items(store):
    """Its own hooks on items (the SDK's tests fail writes in them) would be bypassed."""

    class Transforming(CtxStoreSession):
        async def add_items(self, items: list[Any]) -> None:
            await super().add_items(items)

    class Plain(CtxStoreSession):
        pass

    hooked = Transforming("sub", store)
    assert run(hooked._get_compaction_snapshot(5)) is None
    assert run(hooked._atomic_replace_items([ITEMS[0]])) is False
    assert run(Plain("plain", store)._get_compaction_snapshot(5)) is not None


def test_a_cancelled_add_is_reported_once_it_is_stored(store):
    """As in the SDK's own sessions: the write on its thread cannot be stopped, so the
    cancellation reaches the caller after it, and the items are there."""
    entered, release = threading.Event(), threading.Event()

    class SlowStore:
        def __getattr__(self, name: str) -> Any:
            return getattr(store, name)

        def insert(self, *args: Any, **kwargs: Any) -> Any:
            entered.set()
            release.wait(10)
            return store.insert(*args, **kwargs)

    session = CtxStoreSession("cancelled", SlowStore())
    _ = session.context_id

    async def cancel_mid_write() -> bool:
        task = asyncio.create_task(session.add_items([ITEMS[0]]))
        await asyncio.to_thread(entered.wait, 10)
        task.cancel()
        await asyncio.sleep(0.05)
        still_writing = not task.done()
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        return still_writing

    assert run(cancel_mid_write()) is True
    assert run(CtxStoreSession("cancelled", store).get_items()) == [ITEMS[0]]


def test_tool_outputs_and_reasoning_stay_what_they_are(store):
    session = CtxStoreSession("native", store)
    run(session.add_items(ITEMS))
    visible = store.visible(session.context_id)
    roles = {m.native.get("type", "message"): m.role for m in visible.messages if m.native}
    assert roles["function_call_output"] == "tool" and roles["reasoning"] == "assistant"
    assert visible.to_responses() == ITEMS  # what the model is sent back, as it was given
    run(session.add_items([ITEMS[4]]))  # an output without its call: the SDK's to judge
    assert run(session.get_items())[-1] == ITEMS[4]


def test_sessions_written_by_the_older_adapter_keep_their_shape(store):
    """A session made before native items (no as-given mark) is written as it was."""
    cid = store.context_for_key("agents-session:legacy", metadata={"agents_session_id": "legacy"})
    store.insert(cid, {"role": "user", "content": "hi", "metadata": {"agents_item": ITEMS[0]}})
    session = CtxStoreSession("legacy", store)
    run(session.add_items([ITEMS[2]]))
    assert run(session.get_items()) == [ITEMS[0], ITEMS[2]]
    assert store.visible(cid).messages[-1].native is None  # the older representation
