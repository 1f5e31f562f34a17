"""The async store: the contract's operations, the same semantics as the sync store (one
suite, both stores, every backend), writers of both kinds racing on one context, and the
event loop never blocked by a writer that holds the database."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import inspect
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxstore import aopen
from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.async_store import AsyncContextStore
from ctxstore.adapters.store.contract import ContextOperations
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.domain.errors import CtxStoreError, VersionConflictError
from ctxstore.domain.messages import Message

from ..conftest import examples


class Blocking:
    """An async store driven from test code that is not async: every call runs on one
    event loop, in a thread of its own."""

    def __init__(self, url: str, settings: Settings) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.store: AsyncContextStore = self.run(AsyncContextStore.open(url, settings))

    def run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(60)

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.store, name)
        return lambda *args, **kwargs: self.run(method(*args, **kwargs))

    def shut(self) -> None:
        self.run(self.store.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture(params=["sync", "async"])
def either(request: pytest.FixtureRequest, store_url: str) -> Iterator[Any]:
    """The sync store or the async one (driven through Blocking), on every backend."""
    settings = Settings(snapshot_interval=5, actor="tester")
    if request.param == "sync":
        with ContextStore.from_url(store_url, settings) as store:
            yield store
        return
    driven = Blocking(store_url, settings)
    yield driven
    driven.shut()


def test_the_async_store_has_every_operation_with_the_sync_stores_parameters():
    ops = {
        n
        for n, m in inspect.getmembers(ContextOperations)
        if inspect.isfunction(m) and not n.startswith("_")
    }
    for name in sorted(ops - {"close"}):
        mine = getattr(AsyncContextStore, name)
        assert inspect.iscoroutinefunction(mine) or inspect.isasyncgenfunction(mine), name
        theirs = inspect.signature(getattr(ContextStore, name)).parameters.values()
        ours = inspect.signature(mine).parameters.values()
        assert {(p.name, p.kind) for p in ours} == {(p.name, p.kind) for p in theirs}, name


@settings(
    max_examples=examples(15),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_random_sequences_match_the_reference_model_on_both_stores(
    data, either, reference_model, draw_operation, apply_operation
):
    model = reference_model()
    cid = either.create()
    counter = [0]
    for _ in range(data.draw(st.integers(1, 25))):
        op = draw_operation(data, model, counter)
        expected_error = model.apply(op)
        try:
            apply_operation(either, cid, op)
        except CtxStoreError as exc:
            assert type(exc).__name__ == expected_error, (op, exc)
        else:
            assert expected_error is None, (op, expected_error)
        v = either.visible(cid)
        assert [(m.id, m) for m in v.messages] == [
            (i, Message.model_validate(m)) for i, m in model.items
        ]
        assert v.batch == model.batch
    assert either.verify(cid).ok
    head = either.visible(cid)
    # (a store's hook; the async store awaits its own on its loop)
    read = (
        either.hooks.visible_messages
        if isinstance(either, ContextStore)
        else either.visible_messages
    )
    assert read(cid) == [m.stored() for m in head.messages]


def test_async_and_sync_writers_racing_on_one_context_lose_nothing(store_url: str):
    driven = Blocking(store_url, Settings(actor="async"))
    try:
        # memory://: one database per store object, so the async store's own sync twin.
        twin = store_url.startswith("memory")
        other = driven.store.sync if twin else ContextStore.from_url(store_url)
        with contextlib.nullcontext(other) if twin else other as sync:
            cid = sync.create(actor="sync")

            async def writes() -> None:
                await asyncio.gather(*(
                    driven.store.insert(cid, {"role": "user", "content": f"a{n}"})
                    for n in range(40)
                ))  # fmt: skip

            done = threading.Event()

            def write_async() -> None:
                driven.run(writes())
                done.set()

            thread = threading.Thread(target=write_async)
            thread.start()
            for n in range(40):
                sync.insert(cid, {"role": "user", "content": f"s{n}"}, actor="sync")
            thread.join(60)
            assert done.is_set()
            texts = [str(m.content) for m in sync.visible(cid).messages]
            assert sorted(texts) == sorted(
                [f"a{n}" for n in range(40)] + [f"s{n}" for n in range(40)]
            )
            assert [t for t in texts if t.startswith("s")] == [f"s{n}" for n in range(40)]
            assert driven.visible(cid).version == sync.visible(cid).version == 81
            assert sync.verify(cid).ok
            with pytest.raises(VersionConflictError):
                driven.insert(cid, {"role": "user", "content": "late"}, expected_version=3)
    finally:
        driven.shut()


def test_a_writer_holding_sqlite_does_not_block_the_loop(tmp_path):
    url = f"sqlite:///{tmp_path / 'held.db'}"

    async def main() -> int:
        async with await aopen(url) as store:
            cid = await store.create()
            holder = ContextStore.from_url(url)
            pool: Any = holder._storage.recorder.datastore.pool  # type: ignore[attr-defined]
            lock = pool.get_connection(is_writer=True)
            raw = lock._sqlite_conn
            raw.execute("BEGIN IMMEDIATE")  # another connection holds the write lock
            write = asyncio.create_task(store.insert(cid, {"role": "user", "content": "hi"}))

            async def release() -> None:
                # Runs on the same loop: were the write waiting with the loop blocked (a
                # busy timeout), this could not run until the write gave up, and it would
                # fail "database is locked" instead of landing.
                for _ in range(20):
                    await asyncio.sleep(0.005)
                assert not write.done()  # it waits for the lock ...
                raw.execute("COMMIT")
                pool.put_connection(lock)

            await release()
            written = await write  # ... and lands once it is released
            holder.close()
            return written.version

    assert asyncio.run(main()) == 2


def test_follow_and_a_streamed_reply_on_the_async_store(store_url: str):
    async def main() -> list[str]:
        async with await aopen(store_url) as store:
            cid = await store.create()
            seen: list[str] = []

            async def follow() -> None:
                async for event in store.follow(cid, after=0, idle=2):
                    seen.append(event.type)
                    if event.type == "finish":
                        return

            follower = asyncio.create_task(follow())
            async with await store.stream(cid) as reply:
                for word in ("one ", "two"):
                    await reply.add({"text": word})
            await follower
            visible = await store.visible(cid)
            assert visible.messages[-1].content == "one two"
            return seen

    assert asyncio.run(main())[:2] == ["create", "begin"]


def test_attachments_through_the_async_store(store_url: str):
    pixel = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(5000)).decode()
    message = {"role": "user", "content": [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{pixel}"}},
    ]}  # fmt: skip

    async def main() -> None:
        async with await aopen(store_url) as store:
            cid = await store.create()
            await store.insert(cid, [message, message])  # (stored once, on a worker thread)
            held = await store.visible(cid)
            assert held.messages[0].content[1].image_url["url"].startswith("ctxstore-blob:")  # type: ignore[index,union-attr]
            assert (await store.visible(cid, inline=True)).to_openai() == [message, message]
            inlined = await store.visible_messages(cid, inline=True)
            assert [m["content"] for m in inlined] == [message["content"]] * 2

    asyncio.run(main())


def test_the_loop_keeps_turning_while_a_sqlite_commit_is_held_open(tmp_path):
    """The commit is held open (the recorder's insert waits for a signal) until the loop
    has turned ten times: only a commit off the loop lets those turns happen. Not a timing
    assertion: with the commit on the loop, the signal never comes and the wait runs out."""
    url = f"sqlite:///{tmp_path / 'turning.db'}"
    released = threading.Event()

    async def main() -> tuple[list[bool], int]:
        async with await aopen(url) as store:
            cid = await store.create()
            recorder: Any = store._core.storage.recorder
            insert = recorder.insert_events_with

            held: list[bool] = []
            entered = threading.Event()

            def held_open(*args: Any, **kwargs: Any) -> Any:
                entered.set()
                held.append(released.wait(timeout=5))  # the commit, held open
                return insert(*args, **kwargs)

            recorder.insert_events_with = held_open
            turns = 0

            async def ticker() -> None:
                nonlocal turns
                while True:
                    await asyncio.sleep(0)
                    turns += entered.is_set()  # the loop's turns while the commit is open
                    if turns == 10:
                        released.set()

            ticking = asyncio.create_task(ticker())
            written = await store.insert(cid, {"role": "user", "content": "hi"})
            ticking.cancel()
            return held, written.version

    held, version = asyncio.run(main())
    assert held == [True] and version == 2  # held open once, released by the loop's turns


def test_an_insert_cancelled_while_its_context_loads_caches_nothing(tmp_path):
    """The context's state is read on a worker thread; an await cancelled meanwhile leaves
    the cache as it was, even once the read ends (a state cached by the worker after the
    cancellation could land while another command holds the context's lock)."""
    url = f"sqlite:///{tmp_path / 'c.db'}"
    with ContextStore.from_url(url) as seed:
        cid = seed.create(actor="a")
        seed.insert(cid, [{"role": "user", "content": "hi"}], actor="a")
    reading, release, read = threading.Event(), threading.Event(), threading.Event()

    async def scenario() -> None:
        store = await aopen(url)
        try:
            core = store._core
            storage = core.storage
            real = storage.get

            def slow(c: Any, version: Any = None) -> Any:
                reading.set()
                release.wait(5)
                try:
                    return real(c, version)
                finally:
                    read.set()

            storage.get = slow  # type: ignore[method-assign,assignment]
            task = asyncio.ensure_future(
                store.insert(cid, [{"role": "user", "content": "late"}], actor="a")
            )
            while not reading.is_set():
                await asyncio.sleep(0.001)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            release.set()
            while not read.is_set():  # the read ends on its thread
                await asyncio.sleep(0.001)
            await asyncio.sleep(0.05)  # (and what its caller does after it)
            held = core.cache.held(cid)
            assert held.ctx is None and held.erasures is None
            storage.get = real  # type: ignore[method-assign]
            done = await store.insert(cid, [{"role": "user", "content": "after"}], actor="a")
            assert done.version == 3  # the cancelled insert wrote nothing
        finally:
            await store.close()

    asyncio.run(scenario())
