"""Writers that lose races on one context take turns (adapters/contention), on SQLite and
PostgreSQL. bench/bench_scaling.py shows it at full size: writer processes flat out on one
context, none giving up."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest

from ctxstore.adapters.settings import Settings
from ctxstore.adapters.storage import turns as contention
from ctxstore.adapters.storage.turns import context_lock_key
from ctxstore.adapters.store import writer as store_module
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.domain.errors import VersionConflictError

pytestmark = pytest.mark.slow  # writers racing on one context


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def two_stale_writers(url: str) -> tuple[ContextStore, ContextStore, str]:
    """Two stores; b's cache holds the context one version behind."""
    a = ContextStore.from_url(url, Settings(actor="a"))
    b = ContextStore.from_url(url, Settings(actor="b"))
    cid = str(a.create())
    a.insert(cid, user("first"))
    b.visible(cid)  # b caches version 2
    a.insert(cid, user("a moves on"))  # b's cache is now stale
    return a, b, cid


def turn_is_free(store: ContextStore, cid: str) -> bool:
    """Whether another session (PostgreSQL) or process (SQLite) can take the turn now."""
    key = context_lock_key(store.context_uuid(cid))
    datastore = store._storage.recorder.datastore  # type: ignore[attr-defined]
    if store.url.startswith("postgresql"):
        with datastore.get_connection() as conn:
            took = conn.execute("SELECT pg_try_advisory_lock(%s) AS t", (key,)).fetchone()
            conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
            return bool(took and took["t"])
    path = store.url.removeprefix("sqlite:///") + "-turns"
    probe = (
        "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR)\n"
        "try: fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, int(sys.argv[2]))\n"
        "except OSError: sys.exit(1)"
    )
    offset = str(key & 0x7FFF_FFFF_FFFF)
    return subprocess.run([sys.executable, "-c", probe, path, offset], check=False).returncode == 0


def test_a_racing_writer_without_a_turn_loses_and_can_give_up(durable_url, monkeypatch):
    monkeypatch.setattr(store_module, "MAX_ATTEMPTS", 1)
    a, b, cid = two_stale_writers(durable_url)
    with a, b:
        with pytest.raises(VersionConflictError, match="gave up after 1"):
            b.insert(cid, user("b from a stale view"))
        assert [m.content for m in a.visible(cid).messages] == ["first", "a moves on"]


def test_after_lost_races_a_writer_takes_its_turn_and_reads_the_newest_state(
    durable_url, monkeypatch
):
    monkeypatch.setattr(store_module, "MAX_ATTEMPTS", 2)
    monkeypatch.setattr(contention, "ESCALATE_AFTER", 1)
    a, b, cid = two_stale_writers(durable_url)
    with a, b:
        # Attempt 1 loses from the stale cache; attempt 2 holds the turn and reads first.
        assert b.insert(cid, user("b after catching up")).version == 4
        assert [m.content for m in a.visible(cid).messages] == [
            "first", "a moves on", "b after catching up",
        ]  # fmt: skip
        assert turn_is_free(b, cid)  # given back


class Holder:
    """Another process holding a context's turn (a subprocess: record locks and sessions
    belong to their process)."""

    SCRIPT = """
import fcntl, os, sys, time
import psycopg

url, key, offset = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
if url.startswith("postgresql"):
    dsn = url.split("?")[0]
    conn = psycopg.connect(dsn, autocommit=True)
    conn.execute("SELECT pg_advisory_lock(%s)", (key,))
else:
    fd = os.open(url.removeprefix("sqlite:///") + "-turns", os.O_RDWR | os.O_CREAT)
    fcntl.lockf(fd, fcntl.LOCK_EX, 1, offset)
print("held", flush=True)
sys.stdin.readline()
"""

    def __init__(self, url: str, cid: str, store: ContextStore) -> None:
        key = context_lock_key(store.context_uuid(cid))
        self.proc = subprocess.Popen(
            [sys.executable, "-c", self.SCRIPT, url, str(key), str(key & 0x7FFF_FFFF_FFFF)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self.proc.stdout is not None and self.proc.stdout.readline() == "held\n"

    def release(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        self.proc.wait(timeout=10)


def test_a_racer_is_refused_while_another_process_holds_the_turn(durable_url, monkeypatch):
    """One attempt only: while another process holds the turn, the insert is refused at
    once and writes nothing; once the turn is given back, the next insert goes in."""
    monkeypatch.setattr(store_module, "MAX_ATTEMPTS", 1)
    with ContextStore.from_url(durable_url) as store:
        cid = str(store.create())
        store.insert(cid, user("before"))
        holder = Holder(durable_url, cid, store)
        try:
            with pytest.raises(VersionConflictError, match="gave up after 1"):
                store.insert(cid, user("refused"))
            assert [m.content for m in store.visible(cid).messages] == ["before"]
        finally:
            holder.release()
        store.insert(cid, user("after the turn"))  # contended now: it takes the turn itself
        assert [m.content for m in store.visible(cid).messages] == ["before", "after the turn"]


def test_writers_taking_turns_never_lose_a_race(durable_url, monkeypatch):
    """Six stores (six caches, as six processes would have) append to one context at once,
    each allowed one attempt only: taking turns, none loses a race."""
    monkeypatch.setattr(store_module, "MAX_ATTEMPTS", 1)
    monkeypatch.setattr(contention, "ESCALATE_AFTER", 0)  # every attempt takes its turn
    stores = [ContextStore.from_url(durable_url, Settings(actor=f"w{n}")) for n in range(6)]
    cid = str(stores[0].create())
    errors: list[BaseException] = []
    start = threading.Barrier(len(stores))

    def write(n: int) -> None:
        start.wait()
        try:
            for i in range(15):
                stores[n].insert(cid, user(f"{n}:{i}"))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert not errors, errors
        seen = [str(m.content) for m in stores[0].visible(cid).messages]
        assert sorted(seen) == sorted(f"{n}:{i}" for n in range(6) for i in range(15))
        for n in range(6):  # each writer's messages in its own order
            assert [s for s in seen if s.startswith(f"{n}:")] == [f"{n}:{i}" for i in range(15)]
        assert [h.version for h in stores[0].history(cid)] == list(range(1, 92))
    finally:
        for s in stores:
            s.close()


def test_racers_in_one_process_never_refuse_each_other(durable_url):
    """Threads of one process (one store, or several) racing on a context only race: a
    refusal means a turn is held, and none is."""
    stores = [ContextStore.from_url(durable_url) for _ in range(2)]
    try:
        key = f"session-{durable_url[-6:]}"
        found: list[object] = []

        def open_and_add(n: int) -> None:
            try:
                cid = stores[n % 2].context_for_key(key)
                stores[n % 2].insert(cid, user(f"hello {n}"))
                found.append(cid)
            except BaseException as exc:  # noqa: BLE001 - reported below
                found.append(exc)

        threads = [threading.Thread(target=open_and_add, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(set(found)) == 1 and not isinstance(found[0], BaseException), found
        assert len(stores[0].visible(str(found[0])).messages) == 8
    finally:
        for s in stores:
            s.close()


def test_a_turn_held_in_this_process_refuses_its_racers(durable_url, monkeypatch):
    monkeypatch.setattr(store_module, "MAX_ATTEMPTS", 1)
    with ContextStore.from_url(durable_url) as store, ContextStore.from_url(durable_url) as other:
        cid = str(store.create())
        with store._storage.turns.turn(store.context_uuid(cid), wanted=True) as held:
            assert held is not None
            with pytest.raises(VersionConflictError, match="gave up after 1"):
                other.insert(cid, user("refused"))
            assert store.visible(cid).messages == []
        other.insert(cid, user("r"))
        assert [m.content for m in store.visible(cid).messages] == ["r"]
