"""Every write is settled, never reported as a plain failure once it may be stored.

A fault is injected right after a write's commit went through (PostgreSQL: the connection
closes while the reply is read; SQLite: the driver fails after the commit), on every
command, sync and async, SQLite and PostgreSQL, racing and under the context's turn. The
command then answers its stored result, or OutcomeUnknownError naming what to look for
when the store cannot be read to tell: never StoreUnavailableError, which says "not
stored" and invites a retry that would apply it twice. What it wrote is there once.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import psycopg
import pytest
from eventsourcing.persistence import OperationalError

from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.async_store import AsyncContextStore
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.adapters.store.parts import parts_of
from ctxstore.domain.errors import OutcomeUnknownError

LOST = "server closed the connection unexpectedly"


@dataclass
class Fault:
    """The next write's commit goes through and its reply is lost (`fired` once it did)."""

    readable: bool  # whether the store can be read afterwards, to tell
    fired: int = 0
    then: Callable[[], None] | None = None  # what else happens right after the commit

    def commit_then_lose(self) -> bool:
        """Whether this write loses its reply (the first one after arming)."""
        if self.fired:
            return False
        self.fired = 1
        if self.then is not None:
            self.then()
        return True


@contextmanager
def reply_lost(store: ContextStore, fault: Fault) -> Iterator[Fault]:
    """Arm `fault` on every path a write takes to the database: the sync recorder (racing,
    under a turn, an import), the async store's inserts, and the eraser."""
    storage: Any = store._storage
    recorder = storage.recorder
    eraser_class = type(storage.eraser())
    saved: list[tuple[Any, str, Any]] = []

    def patch(owner: Any, name: str, wrapper: Any) -> None:
        saved.append((owner, name, owner.__dict__.get(name)))
        setattr(owner, name, wrapper)

    real_erase, real_records = eraser_class.erase, eraser_class.records

    def erase(self: Any, record: Any) -> Any:
        done = real_erase(self, record)
        if fault.commit_then_lose():
            raise OperationalError(LOST)
        return done

    def records(self: Any) -> Any:
        if fault.fired and not fault.readable:
            raise OperationalError(LOST)
        return real_records(self)

    patch(eraser_class, "erase", erase)
    patch(eraser_class, "records", records)
    real_select = recorder.select_events

    def select_events(*args: Any, **kwargs: Any) -> Any:
        if fault.fired and not fault.readable:
            raise OperationalError(LOST)
        return real_select(*args, **kwargs)

    patch(recorder, "select_events", select_events)
    if storage.backend.name == "postgresql":
        from ctxstore.adapters.storage.async_events import PostgresAsyncEvents
        from ctxstore.adapters.storage.postgres_recorder import OrderedPostgresRecorder

        real_rows, real_async = OrderedPostgresRecorder._insert_rows, PostgresAsyncEvents.insert

        def insert_rows(self: Any, curs: Any, events: Any, erasures: Any) -> Any:
            rows = real_rows(self, curs, events, erasures)  # autocommit: committed
            if fault.commit_then_lose():
                curs.connection.pgconn.finish()  # the session ends before its reply is read
                raise psycopg.OperationalError(LOST)
            return rows

        async def insert_async(self: Any, *args: Any) -> None:
            await real_async(self, *args)
            if fault.commit_then_lose():
                raise OperationalError(LOST)  # (what the async insert raises for psycopg's)

        patch(OrderedPostgresRecorder, "_insert_rows", insert_rows)
        patch(PostgresAsyncEvents, "insert", insert_async)
    else:
        real_insert, real_with = recorder.insert_events, recorder.insert_events_with

        def insert_events(*args: Any, **kwargs: Any) -> Any:
            done = real_insert(*args, **kwargs)
            if fault.commit_then_lose():
                raise OperationalError("disk I/O error")
            return done

        def insert_events_with(*args: Any, **kwargs: Any) -> Any:
            done = real_with(*args, **kwargs)
            if fault.commit_then_lose():
                raise OperationalError("disk I/O error")
            return done

        patch(recorder, "insert_events", insert_events)
        patch(recorder, "insert_events_with", insert_events_with)
    try:
        yield fault
    finally:
        for owner, name, was in reversed(saved):
            if was is None:
                delattr(owner, name)
            else:
                setattr(owner, name, was)


# ---- the commands: each runs on a prepared context; `count` rises by one when applied once


def _turns(n: int) -> list[dict[str, Any]]:
    return [
        m
        for i in range(n)
        for m in (
            {"role": "user", "content": f"question {i} " + "words " * 30},
            {"role": "assistant", "content": f"answer {i} " + "more words " * 30},
        )
    ]


def _typed(kind: str) -> Callable[[ContextStore, UUID], int]:
    return lambda store, cid: [h.type for h in store.history(cid)].count(kind)


def _contexts(store: ContextStore, cid: UUID) -> int:
    return len(store.contexts())


def _erasures(store: ContextStore, cid: UUID) -> int:
    return len(store.erasures())


RESPONSE = {
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"},
                 "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
}  # fmt: skip


def _ids(store: ContextStore, cid: UUID) -> list[str]:
    return [str(m.id) for m in store.visible(cid).messages]


@dataclass(frozen=True)
class Case:
    run: Callable[[Any, UUID, Any], Any]  # (store or async store, context, prepared) -> ...
    count: Callable[[ContextStore, UUID], int]
    prepare: Callable[[ContextStore, UUID], Any] = lambda store, cid: None
    turns: bool = True  # a command on one context: it may run under the context's turn


def _streamed(store: ContextStore, cid: UUID) -> str:
    begun = store.begin(cid, {"role": "assistant", "content": ""})
    store.append(cid, begun.ids[0], [{"text": "streamed"}])
    return begun.ids[0]


CASES = {
    "insert": Case(lambda s, c, p: s.insert(c, [{"role": "user", "content": "one"}]),
                   _typed("insert")),
    "delete": Case(lambda s, c, p: s.delete(c, [p]), _typed("delete"),
                   lambda s, c: _ids(s, c)[-1]),
    "replace": Case(lambda s, c, p: s.replace(c, p, "new text"), _typed("replace"),
                    lambda s, c: _ids(s, c)[-1]),
    "compress": Case(lambda s, c, p: s.compress(c, p, "in short"), _typed("compress"),
                     lambda s, c: _ids(s, c)[:4]),
    "batch_start": Case(lambda s, c, p: s.batch_start(c), _typed("batch_start")),
    "batch_end": Case(lambda s, c, p: s.batch_end(c), _typed("batch_end"),
                      lambda s, c: s.batch_start(c)),
    "compact": Case(lambda s, c, p: s.compact(c), _typed("compress")),
    "usage": Case(lambda s, c, p: s.record_usage(c, model="gpt-4o", prompt_tokens=10),
                  _typed("usage")),
    "record_response": Case(lambda s, c, p: s.record_response(c, RESPONSE), _typed("usage")),
    "stream_finish": Case(lambda s, c, p: s.finish(c, p), _typed("finish"), _streamed),
    "fork": Case(lambda s, c, p: s.fork(c, name="forked"), _contexts, turns=False),
    "create": Case(lambda s, c, p: s.create(name="made"), _contexts, turns=False),
    "import_events": Case(lambda s, c, p: s.import_events(p, new_id=True), _contexts,
                          lambda s, c: list(s.export_events(c)), turns=False),
    "import_transcript": Case(lambda s, c, p: s.import_transcript(_turns(2), name="t"),
                              _contexts, turns=False),
    "erase": Case(lambda s, c, p: s.erase(c, reason="asked"), _erasures, turns=False),
}  # fmt: skip

SURFACES = ("sync", "async")
# Every command, on each surface; a command on one context also under the context's turn
# (PostgreSQL: its write and the turn's release then go through the turn's connection).
WRITES = [
    pytest.param(name, surface, path, id=f"{name}-{surface}-{path}")
    for name, case in CASES.items()
    for surface in SURFACES
    for path in (("racing", "turn") if case.turns else ("racing",))
]


def _store(durable_url: str) -> ContextStore:
    return ContextStore.from_url(durable_url, Settings(actor="t", snapshot_interval=1000))


def _run(store: ContextStore, surface: str, case: Case, cid: UUID, prepared: Any) -> Any:
    if surface == "sync":
        return case.run(store, cid, prepared)

    async def awaited() -> Any:
        astore = AsyncContextStore(store, parts_of(store).storage.async_events())
        try:
            return await case.run(astore, cid, prepared)
        finally:  # (the sync store it shares is closed by its owner)
            await astore._events.close()
            astore._pool.shutdown(wait=True)

    return asyncio.run(awaited())


def settled_once(
    durable_url: str, name: str, surface: str, path: str, readable: bool
) -> tuple[Any, BaseException | None]:
    """Run command `name` with its reply lost; what it answered (or raised), after
    checking it was applied exactly once."""
    case = CASES[name]
    with _store(durable_url) as store:
        cid = store.create(name="ctx")
        store.insert(cid, _turns(8))
        prepared = case.prepare(store, cid)
        before = case.count(store, cid)
        if path == "turn":
            store._storage.turns.saw_others(cid)  # the next command takes the context's turn
        fault = Fault(readable=readable)
        raised: BaseException | None = None
        answer: Any = None
        with reply_lost(store, fault):
            try:
                answer = _run(store, surface, case, cid, prepared)
            except OutcomeUnknownError as exc:
                raised = exc
        assert fault.fired, "the fault was not reached"
    with _store(durable_url) as store:  # another process's view: what is stored
        assert case.count(store, cid) == before + 1
        if isinstance(raised, OutcomeUnknownError) and raised.command_id and name != "erase":
            # The history tells what the command id names: its events, once each.
            where = UUID(raised.context_id)  # (a creation's: the new context)
            named = [e.type for e in store.history(where) if e.command_id == raised.command_id]
            assert named and len(set(named)) == len(named), named
    return answer, raised


@pytest.mark.parametrize("name,surface,path", WRITES)
def test_a_write_whose_reply_is_lost_answers_its_stored_result(durable_url, name, surface, path):
    answer, raised = settled_once(durable_url, name, surface, path, readable=True)
    assert raised is None and answer is not None


@pytest.mark.parametrize("name,surface,path", WRITES)
def test_a_write_whose_reply_is_lost_while_the_store_cannot_be_read_is_outcome_unknown(
    durable_url, name, surface, path
):
    _answer, raised = settled_once(durable_url, name, surface, path, readable=False)
    assert isinstance(raised, OutcomeUnknownError), raised


# ---- PostgreSQL: the recorder tries a write once more after its reply was lost ----------


def _held_turn(pg_dsn: str, cid: UUID, seconds: float) -> Callable[[], None]:
    """Another writer takes the context's turn for `seconds`, from now."""
    from ctxstore.adapters.storage.turns import context_lock_key

    def take() -> None:
        other = psycopg.connect(pg_dsn, autocommit=True)
        other.execute("SELECT pg_advisory_lock(%s)", (context_lock_key(cid),))
        threading.Timer(seconds, other.close).start()  # its session ends: the lock with it

    return take


def _pg_dsn(url: str) -> str:
    return url.partition("?")[0]  # (the store's own parameters are not libpq's)


@pytest.mark.postgres
@pytest.mark.parametrize("second", ["turn_held", "no_connection"])
@pytest.mark.parametrize("name", [n for n, c in CASES.items() if c.turns])
def test_a_write_tried_again_after_its_lost_reply_is_applied_once(request, tmp_path, name, second):
    """The first try committed and its connection broke; the recorder's second try meets
    another writer's turn (the command queued for it and ran again: applied twice) or no
    connection (it was refused as not stored). Another writer's turn: the first try's
    events are found, the command answers its result. No connection: asking would wait
    for one again (a stopped server's write would wait twice), so the outcome is unknown,
    named by the command id."""
    from tests.conftest import make_url

    case = CASES[name]
    url = make_url("postgres", tmp_path, request)
    with _store(url) as store:
        cid = store.create(name="ctx")
        store.insert(cid, _turns(8))
        prepared = case.prepare(store, cid)
        before = case.count(store, cid)
        pool = store._storage.recorder.datastore.pool
        if second == "turn_held":
            then = _held_turn(_pg_dsn(url), cid, 0.5)
        else:
            real = pool.getconn

            def then() -> None:
                from psycopg_pool import PoolTimeout

                def none(*args: Any, **kwargs: Any) -> Any:
                    pool.getconn = real
                    raise PoolTimeout("couldn't get a connection after 2.00 sec")

                pool.getconn = none

        with reply_lost(store, Fault(readable=True, then=then)):
            if second == "turn_held":
                assert case.run(store, cid, prepared) is not None
            else:
                with pytest.raises(OutcomeUnknownError) as unknown:
                    case.run(store, cid, prepared)
    with _store(url) as store:
        assert case.count(store, cid) == before + 1
        if second == "no_connection":
            named = [e.type for e in store.history(cid) if e.command_id == unknown.value.command_id]
            assert named and len(set(named)) == len(named), named
