"""A command stored on PostgreSQL is never reported as a plain failure: backends terminated
at random moments while several writers append (what a restart or failover does to
clients). Each command ends acknowledged (stored once), refused as not stored (absent), or
outcome-unknown with its command id (stored at most once)."""

from __future__ import annotations

import asyncio
import contextlib
import random
import sqlite3
import threading
import time
from collections import Counter

import pytest
from eventsourcing.persistence import OperationalError as PersistenceOperationalError

from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.domain.errors import OutcomeUnknownError, StoreUnavailableError


class Broken(sqlite3.OperationalError):
    """A database failure raised by a driver after the command's commit."""


def _insert_until_snapshot(store: ContextStore, cid, n: int = 8) -> list[int]:
    return [store.insert(cid, [{"role": "user", "content": f"m{i}"}]).version for i in range(n)]


def test_a_snapshot_failing_after_the_commit_reports_the_command_stored(durable_url):
    """The snapshot's reads are raw driver calls: a failure there is not the command's."""
    with ContextStore.from_url(durable_url, Settings(snapshot_interval=2)) as store:
        cid = store.create(name="snapshots fail")
        store._core.bounds.of = lambda *a, **k: (_ for _ in ()).throw(Broken("disk I/O error"))
        assert _insert_until_snapshot(store, cid) == list(range(2, 10))
        assert len(store.history(cid)) == 9


def test_a_proactive_compaction_failing_after_an_insert_reports_the_insert_stored(
    durable_url, monkeypatch
):
    from ctxstore.adapters.store import compaction

    def fails(*args, **kwargs):
        raise StoreUnavailableError("the store failed: OperationalError: server closed")

    monkeypatch.setattr(compaction, "compact_proactively", fails)
    settings = Settings.model_validate({"compaction": {"auto": True, "message_limit": 2}})
    with ContextStore.from_url(durable_url, settings) as store:
        cid = store.create(name="compaction fails")
        assert _insert_until_snapshot(store, cid, 4) == [2, 3, 4, 5]

    async def through_async() -> int:
        from ctxstore.adapters.store.async_store import AsyncContextStore

        async with await AsyncContextStore.open(durable_url, settings) as astore:
            return (await astore.insert(cid, [{"role": "user", "content": "a"}])).version

    assert asyncio.run(through_async()) == 6


@pytest.mark.postgres
def test_releasing_a_turn_on_a_dead_connection_reports_the_command_stored(pg_url, monkeypatch):
    """The turn's connection dies after the write committed: the unlock fails, the command
    is stored, the connection is not handed back to the pool holding the lock."""
    from ctxstore.adapters.storage import postgres_turns

    with ContextStore.from_url(pg_url) as store:
        cid = store.create(name="turn lost")
        turns = store._storage.turns
        turns.saw_others(cid)  # the next command takes the context's turn
        real = postgres_turns.PostgresTurns._turn.__wrapped__

        @contextlib.contextmanager
        def dying(self, c):
            gen = real(self, c)
            turn = next(gen)
            yield turn
            turn.connection.pgconn.finish()  # the session ends with its socket
            with contextlib.suppress(StopIteration):
                next(gen)

        monkeypatch.setattr(postgres_turns.PostgresTurns, "_turn", dying)
        written = store.insert(cid, [{"role": "user", "content": "stored"}])
        monkeypatch.undo()
        assert written.version == 2
        assert [m.content for m in store.visible(cid).messages] == ["stored"]
        assert store.insert(cid, [{"role": "user", "content": "next"}]).version == 3


def _admin(pg_url: str, pg_admin_dsn: str) -> str:
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    info = conninfo_to_dict(pg_admin_dsn)
    info["dbname"] = pg_url.rsplit("/", 1)[1].split("?")[0]
    return make_conninfo("", **info)


@pytest.mark.postgres
@pytest.mark.slow  # backends terminated at random moments under four writers
def test_terminated_backends_never_report_a_stored_command_as_failed(pg_url, pg_admin_dsn):
    import psycopg

    # A small snapshot interval puts snapshot writes (after the commit point) in the way.
    settings = Settings(snapshot_interval=3, actor="writer")
    outcomes: dict[str, str] = {}
    lock = threading.Lock()
    stop = threading.Event()
    with ContextStore.from_url(pg_url, settings) as store:
        shared = store.create(name="shared")
        own = [store.create(name=f"w{n}") for n in range(4)]

        def write(n: int) -> None:
            rng = random.Random(n)
            i = 0
            while not stop.is_set():
                tag = f"w{n}-{i}"
                i += 1
                cid = shared if rng.random() < 0.5 else own[n]
                try:
                    store.insert(cid, [{"role": "user", "content": tag}])
                    kind = "acked"
                except OutcomeUnknownError:
                    kind = "unknown"
                except StoreUnavailableError:
                    kind = "failed"
                with lock:
                    outcomes[tag] = kind

        def acked() -> int:
            with lock:
                return sum(kind == "acked" for kind in outcomes.values())

        threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        rng = random.Random(7)
        # Forty terminations at least, and on until enough commands were acknowledged
        # between them (a loaded machine writes fewer per second).
        deadline, terminated = time.monotonic() + 120, 0
        with psycopg.connect(_admin(pg_url, pg_admin_dsn), autocommit=True) as admin:
            while terminated < 40 or (acked() < 150 and time.monotonic() < deadline):
                terminated += 1
                time.sleep(rng.uniform(0.02, 0.15))
                admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
        time.sleep(0.3)
        stop.set()
        for t in threads:
            t.join()
    with ContextStore.from_url(pg_url, settings) as store:
        stored: Counter[str] = Counter()
        for cid in [shared, *own]:
            for m in store.visible(cid).messages:
                stored[str(m.content)] += 1
    kinds = Counter(outcomes.values())
    assert kinds["acked"] > 100, kinds
    wrong = {
        tag: (kind, stored[tag])
        for tag, kind in outcomes.items()
        if (kind == "acked" and stored[tag] != 1)
        or (kind == "failed" and stored[tag] != 0)
        or (kind == "unknown" and stored[tag] > 1)
    }
    assert not wrong, (wrong, kinds)


def test_an_unknown_outcome_names_a_command_the_history_can_be_asked_about(tmp_path):
    """The reply to a commit is lost and the store cannot be read to check: the error names
    the command, and once the store answers, the history says whether it is there."""
    with ContextStore.from_url(f"sqlite:///{tmp_path / 'lost.db'}") as store:
        cid = store.create(name="lost reply")
        recorder = store._storage.recorder
        real_insert, real_select = recorder.insert_events, recorder.select_events

        def committed_then_lost(stored, **kwargs):
            real_insert(stored, **kwargs)
            raise PersistenceOperationalError(
                "disk I/O error"
            )  # the commit happened; its answer did not arrive

        def unreadable(*args, **kwargs):
            raise PersistenceOperationalError("unable to open database file")

        recorder.insert_events, recorder.select_events = committed_then_lost, unreadable
        with pytest.raises(OutcomeUnknownError) as lost:
            store.insert(cid, [{"role": "user", "content": "was it stored?"}])
        recorder.insert_events, recorder.select_events = real_insert, real_select
        assert lost.value.command_id and lost.value.context_id == str(cid)
        store._core.forget(cid)  # this process's view may be stale after a failure
        found = [e for e in store.history(cid) if e.command_id == lost.value.command_id]
        assert [e.type for e in found] == ["insert"]
        assert len({e.command_id for e in store.history(cid)}) == 2  # creation, insert


@pytest.mark.postgres
@pytest.mark.parametrize("surface", ["sync", "async"])
def test_a_batch_end_stored_under_the_turn_is_never_reported_as_failed(pg_url, surface):
    """Issue 56's batch_end: stored under the context's turn, its reply lost and the store
    unreadable a moment. The settle step raised OutcomeUnknownError, and the turn's release
    on the same dead connection replaced it with "the store failed: OperationalError: the
    connection is closed" (a refusal: a caller retrying it closed a second batch). Every
    command on every path: test_settled_writes.py."""
    from tests.integration.test_settled_writes import settled_once

    _answer, raised = settled_once(pg_url, "batch_end", surface, "turn", readable=False)
    assert isinstance(raised, OutcomeUnknownError), raised
