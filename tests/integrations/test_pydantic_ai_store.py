"""The Pydantic AI conversation store against Pydantic AI's own InMemoryConversationStore:
random sequences of saves (new, extended, stale), loads, branches, forks, deletes and
listings by scope on both, every outcome compared, on every backend and surface; the
conversation readable as its context's messages."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("pydantic_ai")

from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import InMemoryConversationStore
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

from ctxstore.adapters.integrations.pydantic_ai_store import CtxStoreConversationStore
from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore

from ..conftest import examples, surface_over

TEXTS = ["Hi", "Bonjour", "你好", "Hola", "Привет", "ok"]
ASKED = [ModelRequest(parts=[UserPromptPart(content=t)]) for t in TEXTS]
SAID = [ModelResponse(parts=[TextPart(content=t.upper())]) for t in TEXTS]
turns = st.lists(st.sampled_from(list(zip(ASKED, SAID, strict=True))), min_size=1, max_size=2).map(
    lambda pairs: [m for pair in pairs for m in pair]
)
ids = st.sampled_from(["c1", "c2", "c3"])
scopes = st.sampled_from([None, "alice", "bob"])
ops = st.lists(
    st.one_of(
        st.tuples(st.just("new"), ids, turns, scopes),
        st.tuples(st.just("extend"), ids, turns, scopes),
        st.tuples(st.just("stale"), ids, turns),
        st.tuples(st.just("load"), ids, scopes),
        st.tuples(st.just("branch"), ids, st.integers(0, 4)),
        st.tuples(st.just("fork"), ids, st.integers(0, 4), ids),
        st.tuples(st.just("delete"), ids, scopes),
        st.tuples(st.just("list"), scopes),
    ),
    max_size=10,
)


async def outcome(call: Any) -> Any:
    try:
        return ("ok", await call())
    except Exception as exc:  # noqa: BLE001 - compared by kind
        return ("raised", type(exc).__name__)


def shown(conversation: Conversation | None) -> Any:
    return None if conversation is None else (conversation.conversation_id, conversation.messages)


async def step(store: Any, op: tuple) -> Any:
    name, cid, *rest = op if op[0] != "list" else (op[0], None, *op[1:])
    if name == "new":
        msgs, scope = rest

        async def new() -> Any:
            saved = await store.save(Conversation(conversation_id=cid, messages=msgs), scope=scope)
            return [e.message for e in saved]  # (entry ids are minted anew by each store)

        return await outcome(new)
    if name == "extend":
        msgs, scope = rest

        async def extend() -> Any:
            loaded = await store.load(cid, scope=scope)
            if loaded is None:
                return None
            loaded.messages = [*loaded.messages, *msgs]
            return len(await store.save(loaded, scope=scope))

        return await outcome(extend)
    if name == "stale":  # a copy that was never loaded: the store has the conversation

        async def stale() -> Any:
            saved = await store.save(Conversation(conversation_id=cid, messages=rest[0]))
            return [e.message for e in saved]

        return await outcome(stale)
    if name == "load":

        async def load() -> Any:
            return shown(await store.load(cid, scope=rest[0]))

        return await outcome(load)
    if name == "branch":

        async def branch() -> Any:
            loaded = await store.load(cid)
            if loaded is None:
                return None
            return shown(await store.branch(cid, at=min(rest[0], len(loaded.messages)),
                                            expected_revision=loaded.revision))  # fmt: skip

        return await outcome(branch)
    if name == "fork":
        at, new_id = rest

        async def fork() -> Any:
            loaded = await store.load(cid)
            if loaded is None:
                return None
            return shown(await store.fork(cid, at=min(at, len(loaded.messages)),
                                          new_conversation_id=new_id))  # fmt: skip

        return await outcome(fork)
    if name == "delete":
        return await outcome(lambda: store.delete(cid, scope=rest[0]))

    async def listing() -> Any:
        return [r.conversation_id for r in await store.list_conversations(scope=rest[0])]

    return await outcome(listing)


async def drive(store: Any, sequence: list) -> list[Any]:
    seen = [await step(store, op) for op in sequence]
    for cid in ("c1", "c2", "c3"):
        seen.append(await step(store, ("load", cid, None)))
    return seen


@pytest.fixture
def backing(store_url: str) -> Any:
    with ContextStore.from_url(store_url, Settings(actor="t")) as s:
        yield s


@settings(max_examples=examples(25), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(sequence=ops)
def test_every_operation_answers_as_the_in_memory_store(
    backing: ContextStore, sequence: list
) -> None:
    ours = CtxStoreConversationStore(backing, key_prefix=f"pai-{uuid.uuid4().hex}:")
    assert asyncio.run(drive(ours, sequence)) == asyncio.run(
        drive(InMemoryConversationStore(), sequence)
    )


@pytest.mark.parametrize("kind", ["store", "async", "http"])
def test_on_every_surface_the_context_reads_as_the_conversation(
    backing: ContextStore, kind: str
) -> None:
    with surface_over(kind, backing) as face:
        store = CtxStoreConversationStore(face)
        messages: list[Any] = [ASKED[1], SAID[1], ASKED[2], SAID[2]]

        async def case() -> Any:
            await store.save(Conversation(conversation_id="chat-1", messages=messages))
            return await store.load("chat-1")

        loaded = asyncio.run(case())
        assert loaded is not None and loaded.messages == messages
        reader = backing if kind == "async" else face
        cid = reader.lookup_key("pydantic-ai:chat-1")
        assert cid is not None
        assert [m["content"] for m in reader.visible(cid).to_openai()] == [
            "Bonjour",
            "BONJOUR",
            "你好",
            "你好",
        ]
