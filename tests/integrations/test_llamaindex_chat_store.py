"""The LlamaIndex chat store against LlamaIndex's own SimpleChatStore: random sequences of
every operation (sync and async) on both, each result and each raised error compared, on
SQLite and PostgreSQL and through a tenant's HTTP client; messages read as the context's."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("llama_index.core")

from llama_index.core.llms import ChatMessage
from llama_index.core.storage.chat_store.simple_chat_store import SimpleChatStore

from ctxstore.adapters.integrations.llamaindex_chat_store import CtxStoreChatStore
from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore

from ..conftest import examples, surface_over

texts = st.sampled_from(["Hi", "¿Qué tal?", "你好", "Привет", "مرحبا", "ok 👍", ""])
messages = st.one_of(
    st.builds(lambda t: ChatMessage(role="user", content=t), texts),
    st.builds(lambda t: ChatMessage(role="assistant", content=t), texts),
    st.builds(lambda t: ChatMessage(role="system", content=t), texts),
    st.builds(
        lambda t: ChatMessage(
            role="tool", content=t, additional_kwargs={"tool_call_id": "call_1", "name": "lookup"}
        ),
        texts,
    ),
    st.just(
        ChatMessage(
            role="assistant",
            content=None,
            additional_kwargs={
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "lookup", "arguments": '{"q": "x"}'},
                    }
                ]
            },
        )
    ),
)
keys = st.sampled_from(["a", "b", "c/ü"])
ops = st.lists(
    st.one_of(
        st.tuples(st.just("set_messages"), keys, st.lists(messages, max_size=4)),
        st.tuples(st.just("get_messages"), keys),
        st.tuples(st.just("add_message"), keys, messages, st.one_of(st.none(), st.integers(-4, 5))),
        st.tuples(st.just("delete_messages"), keys),
        st.tuples(st.just("delete_message"), keys, st.integers(-5, 5)),
        st.tuples(st.just("delete_last_message"), keys),
        st.tuples(st.just("get_keys")),
    ),
    max_size=14,
)


def outcome(call: Any) -> Any:
    try:
        return ("ok", call())
    except Exception as exc:  # noqa: BLE001 - compared by kind
        return ("raised", type(exc).__name__)


def run(store: Any, op: tuple) -> Any:
    name, *args = op
    if name == "add_message":
        key, message, idx = args
        return outcome(lambda: store.add_message(key, message, idx=idx))
    return outcome(lambda: getattr(store, name)(*args))


@pytest.fixture
def backing(store_url: str) -> Any:
    with ContextStore.from_url(store_url, Settings(actor="t")) as s:
        yield s


@settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(sequence=ops, data=st.data())
def test_every_operation_answers_as_simple_chat_store(
    backing: ContextStore, sequence: list, data: Any
) -> None:
    prefix = f"li-{uuid.uuid4().hex}:"  # a fresh set of keys for each example
    ours, theirs = CtxStoreChatStore(backing, key_prefix=prefix), SimpleChatStore()
    for op in sequence:
        assert run(ours, op) == run(theirs, op), op
    for key in ("a", "b", "c/ü"):
        assert ours.get_messages(key) == theirs.get_messages(key)


@pytest.mark.parametrize("kind", ["store", "async", "http"])
def test_on_every_surface_with_the_async_methods(backing: ContextStore, kind: str) -> None:
    with surface_over(kind, backing) as face:
        ours = CtxStoreChatStore(face)
        theirs = SimpleChatStore()

        async def both(name: str, *args: Any) -> None:
            got = await getattr(ours, name)(*args)
            want = await getattr(theirs, name)(*args)
            assert got == want, name

        async def case() -> None:
            await both("aset_messages", "u1", [ChatMessage(role="user", content="Hola")])
            await both("async_add_message", "u1", ChatMessage(role="assistant", content="¡Hola!"))
            await both("adelete_message", "u1", 0)
            await both("aget_messages", "u1")
            await both("aget_keys")
            await both("adelete_last_message", "u1")
            await both("adelete_messages", "u1")
            await both("aget_keys")

        asyncio.run(case())


def test_the_messages_are_the_contexts(backing: ContextStore) -> None:
    ours = CtxStoreChatStore(backing)
    ours.add_message("u1", ChatMessage(role="user", content="Weather in Paris?"))
    ours.add_message("u1", ChatMessage(role="assistant", content=None, additional_kwargs={"tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]}))  # fmt: skip
    ours.add_message(
        "u1",
        ChatMessage(role="tool", content="21 °C", additional_kwargs={"tool_call_id": "call_1"}),
    )
    ours.add_message("u1", ChatMessage(role="user", content="Merci"), idx=0)
    cid = backing.lookup_key("llamaindex:u1")
    assert cid is not None
    assert [m["role"] for m in backing.visible(cid).to_openai()] == [
        "user",
        "user",
        "assistant",
        "tool",
    ]
    assert backing.visible(cid).to_openai()[3]["tool_call_id"] == "call_1"
