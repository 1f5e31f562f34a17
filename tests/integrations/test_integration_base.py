"""What every integration builds on (adapters/integrations/surface.py, sdk_messages.py): a
message the transcript refuses is kept as a record in its place, and the SDK's read gives
it back; the faces of a sync and an async store, and the bridge awaiting either, a write
settled through a cancellation."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any
from uuid import UUID

import pytest

from ctxstore.adapters.integrations.sdk_messages import (
    REFUSED,
    as_record,
    chat_role,
    insert_or_record,
    insert_or_record_awaited,
)
from ctxstore.adapters.integrations.surface import AwaitedStore, Faces, faces
from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.async_store import AsyncContextStore
from ctxstore.adapters.store.contract import ContextOperations
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.domain.errors import (
    InvalidMessageError,
    InvalidOperationError,
    MalformedTranscriptError,
    VersionConflictError,
)
from ctxstore.domain.plain import is_record

from ..conftest import surface_over

ORPHAN = {"role": "tool", "tool_call_id": "c1", "content": "21 °C"}  # answers no call


@pytest.fixture
def backing(store_url: str) -> Iterator[ContextStore]:
    with ContextStore.from_url(store_url, Settings(actor="t")) as s:
        yield s


def kept_as(metadata: dict[str, Any]) -> Any:
    return lambda: as_record(metadata)


# ---- the record, the role, the fallback -------------------------------------------------------


def test_a_record_is_a_record_keeping_what_it_is_given() -> None:
    record = as_record({"sdk": {"id": 1}, "more": True})
    assert is_record(record)
    assert record["metadata"]["sdk"] == {"id": 1} and record["metadata"]["more"] is True


def test_every_sdk_role_reads_as_a_chat_role() -> None:
    assert [chat_role(r) for r in ("system", "developer", "user", "assistant", "tool")] == [
        "system", "developer", "user", "assistant", "tool",
    ]  # fmt: skip
    assert [chat_role(r) for r in ("chatbot", "model", "function")] == [
        "assistant", "assistant", "tool",
    ]  # fmt: skip
    assert chat_role("critic") == "user"  # any other: input to the model


def test_a_message_the_transcript_refuses_is_kept_as_its_record(backing: ContextStore) -> None:
    cid = backing.create()
    written = insert_or_record(backing, cid, ORPHAN, kept_as({"sdk": ORPHAN}))
    (held,) = backing.visible(cid).messages
    assert held.id == written.ids[0] and is_record(held)
    assert held.metadata["sdk"] == ORPHAN
    # one it holds is inserted as it is, and its record is never made
    made = []

    def record() -> dict[str, Any]:
        made.append(1)
        return as_record({})

    insert_or_record(backing, cid, {"role": "user", "content": "Hi"}, record)
    assert backing.visible(cid).messages[-1].content == "Hi" and made == []


def test_the_record_goes_where_the_message_would_have(backing: ContextStore) -> None:
    cid = backing.create()
    first = backing.insert(cid, {"role": "user", "content": "one"}).ids[0]
    backing.insert(cid, {"role": "user", "content": "three"})
    insert_or_record(backing, cid, ORPHAN, kept_as({"sdk": "two"}), after=first)
    held = backing.visible(cid).messages
    assert [m.content for m in held] == ["one", "", "three"] and is_record(held[1])


def test_only_what_it_is_told_is_refused_becomes_a_record(backing: ContextStore) -> None:
    """A narrower set (ADK's: a call parted from its result only) lets the rest through
    to the caller, and anything but a refusal is never buried in a record."""
    cid = backing.create()
    invalid = {"role": "tool", "content": "no call id"}
    with pytest.raises(InvalidMessageError):
        insert_or_record(backing, cid, invalid, kept_as({}), refused=(MalformedTranscriptError,))
    insert_or_record(backing, cid, invalid, kept_as({"sdk": 1}))  # (REFUSED: kept)
    version = backing.visible(cid).version
    with pytest.raises(VersionConflictError):
        insert_or_record(backing, cid, ORPHAN, kept_as({}), expected_version=version - 1)
    assert not issubclass(VersionConflictError, REFUSED)
    assert len(backing.visible(cid).messages) == 1


def test_the_async_face_keeps_a_refused_message_as_its_record(backing: ContextStore) -> None:
    with surface_over("async", backing) as given:
        store = faces(given).awaited
        assert store is not None

        async def case() -> UUID:
            cid = await store.create()
            await insert_or_record_awaited(store, cid, ORPHAN, kept_as({"sdk": ORPHAN}))
            await insert_or_record_awaited(store, cid, {"role": "user", "content": "Hi"}, dict)
            return cid

        cid = asyncio.run(case())
    held = backing.visible(cid).messages
    assert is_record(held[0]) and held[0].metadata["sdk"] == ORPHAN
    assert held[1].content == "Hi"


# ---- an SDK's read gives a refused message back -------------------------------------------------


def test_llamaindex_reads_back_a_tool_result_with_no_call(backing: ContextStore) -> None:
    pytest.importorskip("llama_index.core")
    from llama_index.core.llms import ChatMessage

    from ctxstore.adapters.integrations.llamaindex_chat_store import CtxStoreChatStore

    ours = CtxStoreChatStore(backing)
    orphan = ChatMessage(role="tool", content="21 °C", additional_kwargs={"tool_call_id": "c1"})
    said = [ChatMessage(role="user", content="Weather?"), orphan]
    for m in said:
        ours.add_message("u1", m)
    assert ours.get_messages("u1") == said
    cid = backing.lookup_key("llamaindex:u1")
    assert cid is not None
    assert is_record(backing.visible(cid).messages[-1])  # (never sent to a model)


@pytest.mark.parametrize("kind", ["store", "async"])
def test_agent_framework_reads_back_a_result_with_no_call(backing: ContextStore, kind: str) -> None:
    pytest.importorskip("agent_framework")
    from agent_framework import Content, Message

    from ctxstore.adapters.integrations.agent_framework_history import (
        CtxStoreHistoryProvider,
    )

    said = [
        Message("user", ["Weather?"]),
        Message("tool", [Content.from_function_result(call_id="c1", result="21 °C")]),
        Message("assistant", ["Sunny."]),
    ]
    with surface_over(kind, backing) as given:
        ours = CtxStoreHistoryProvider(given)

        async def case() -> list[Any]:
            await ours.save_messages("s1", said)  # one command refused: one by one
            return await ours.get_messages("s1")

        got = asyncio.run(case())
    assert [m.to_dict() for m in got] == [m.to_dict() for m in said]
    cid = backing.lookup_key("agent-framework:s1")
    assert cid is not None
    assert [is_record(m) for m in backing.visible(cid).messages] == [False, True, False]


# ---- the faces and the bridge ---------------------------------------------------------------------


def test_a_sync_store_is_the_sync_face_alone(backing: ContextStore) -> None:
    found = faces(backing)
    assert found == Faces(backing, None)
    sync, awaited = found  # (unpacked, as the integrations did)
    assert sync is backing and awaited is None


def awaited(store: AsyncContextStore) -> AwaitedStore:
    return store  # (mypy checks the async store has all an AwaitedStore names)


def test_an_async_store_gives_its_sync_twin_and_itself(backing: ContextStore) -> None:
    with surface_over("async", backing) as given:
        found = faces(given)
        assert found.sync is backing and found.awaited is awaited(given)


def test_an_async_surface_without_a_twin_is_refused() -> None:
    class Awaited:
        async def insert(self, *args: Any) -> None: ...

    with pytest.raises(InvalidOperationError, match="sync twin"):
        faces(Awaited())  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", ["store", "async"])
def test_the_bridge_reads_and_writes_on_either_face(backing: ContextStore, kind: str) -> None:
    with surface_over(kind, backing) as given:
        found = faces(given)
        cid = backing.create()
        ran: list[str] = []

        def on_thread(s: ContextOperations) -> int:
            ran.append("thread")
            return s.insert(cid, {"role": "user", "content": "Hi"}).version

        async def on_loop(a: AwaitedStore) -> int:
            ran.append("loop")
            return (await a.insert(cid, {"role": "user", "content": "Hi"})).version

        async def version_on_loop(a: AwaitedStore) -> int:
            ran.append("loop")
            return (await a.visible(cid)).version

        async def case() -> tuple[int, int]:
            written = await found.write(on_thread, on_loop)
            seen = await found.read(lambda s: s.visible(cid).version, version_on_loop)
            return written, seen

        written, seen = asyncio.run(case())
    assert written == seen == backing.visible(cid).version  # (the one write, read back)
    assert ran == (["thread"] if kind == "store" else ["loop", "loop"])


@pytest.mark.parametrize("kind", ["store", "async"])
def test_a_cancelled_write_is_told_once_it_is_stored(backing: ContextStore, kind: str) -> None:
    with surface_over(kind, backing) as given:
        found = faces(given)
        cid = backing.create()
        started, release = threading.Event(), threading.Event()

        def on_thread(s: ContextOperations) -> None:
            started.set()
            release.wait(10)
            s.insert(cid, {"role": "user", "content": "kept"})

        async def on_loop(a: AwaitedStore) -> None:
            started.set()
            await asyncio.to_thread(release.wait, 10)
            await a.insert(cid, {"role": "user", "content": "kept"})

        async def case() -> None:
            task = asyncio.ensure_future(found.write(on_thread, on_loop))
            await asyncio.to_thread(started.wait, 10)
            task.cancel()
            await asyncio.sleep(0.05)
            assert not task.done()  # the write still runs: the caller is not told yet
            release.set()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert [m.content for m in backing.visible(cid).messages] == ["kept"]

        asyncio.run(case())
