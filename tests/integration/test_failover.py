"""Failover: the primary dies mid-writes (SIGKILL of the server and its backends) and its
synchronous standby is promoted (pg_ctl promote), on clusters this test starts itself
(bench/pg_cluster.py), never the shared server.

Writers in process, awaited and over HTTP go on through the store's multi-host URL
(`h1:p1,h2:p2?target_session_attrs=read-write`) without a restart. Every acknowledged
command is on the new primary once; a command refused as not stored is absent; one whose
outcome was unknown is there at most once, found by its command id. An audit cursor taken
before the failover reads on with no event skipped or repeated, and live tails (in process
and Server-Sent Events) resume from their last event. The old primary, rebuilt as a standby
of the new one, is read from as a replica and never written to.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg
import pytest

from ctxstore.adapters.http.client import CtxStoreClient
from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.async_store import AsyncContextStore
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.domain.errors import OutcomeUnknownError, StoreUnavailableError
from tests.conftest import served

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import pg_cluster

pytestmark = [pytest.mark.postgres, pytest.mark.slow]  # slow: two servers of its own

CONNECT_TIMEOUT = 2


@pytest.fixture
def pair() -> Iterator[tuple[Any, Any]]:
    """A primary whose commits wait for its hot standby (synchronous replication)."""
    if not pg_cluster.available():
        pytest.fail("PostgreSQL 15's binaries are needed to start a primary and a standby")
    with pg_cluster.private_cluster() as primary:
        folder = pg_cluster.private_folder()
        standby = primary.base_backup(folder, standby=True)
        standby.start()
        primary.require_sync_standby()
        try:
            yield primary, standby
        finally:
            with contextlib.suppress(subprocess.CalledProcessError):  # already stopped
                standby.stop()
            shutil.rmtree(folder, ignore_errors=True)


def both(primary: Any, standby: Any, form: str = "hosts") -> str:
    """The URL naming both servers in one of the forms libpq reads."""
    if form == "params":
        return (
            "postgresql://postgres@/postgres?host=127.0.0.1,127.0.0.1"
            f"&port={primary.port},{standby.port}&target_session_attrs=read-write"
        )
    hosts = f"127.0.0.1:{primary.port},127.0.0.1:{standby.port}"
    return f"postgresql://postgres@{hosts}/postgres?target_session_attrs=read-write"


class Writers:
    """Writers appending numbered turns until stopped; what each command came to."""

    def __init__(self) -> None:
        self.acked: dict[UUID, list[str]] = defaultdict(list)
        self.refused: dict[UUID, list[str]] = defaultdict(list)
        self.unknown: list[tuple[UUID, str, str]] = []  # context, text, command id
        self.acked_at: list[float] = []
        self.stop = threading.Event()
        self.lock = threading.Lock()

    def outcome(self, cid: UUID, text: str, exc: BaseException | None) -> None:
        with self.lock:
            if exc is None:
                self.acked[cid].append(text)
                self.acked_at.append(time.monotonic())
            elif isinstance(exc, OutcomeUnknownError):
                self.unknown.append((cid, text, exc.command_id))
            else:
                self.refused[cid].append(text)

    def sync(self, store: Any, cid: UUID, name: str) -> None:
        n = 0
        while not self.stop.is_set():
            text, n = f"{name}-{n}", n + 1
            try:
                store.insert(cid, {"role": "user", "content": text})
                self.outcome(cid, text, None)
            except StoreUnavailableError as exc:
                self.outcome(cid, text, exc)
                time.sleep(0.05)

    def awaited(self, url: str, settings: Settings, cid: UUID) -> None:
        async def run() -> None:
            async with await AsyncContextStore.open(url, settings) as store:
                n = 0
                while not self.stop.is_set():
                    text, n = f"async-{n}", n + 1
                    try:
                        await store.insert(cid, {"role": "user", "content": text})
                        self.outcome(cid, text, None)
                    except StoreUnavailableError as exc:
                        self.outcome(cid, text, exc)
                        await asyncio.sleep(0.05)

        asyncio.run(run())


def _follow(source: Any, cid: UUID, seen: list[int], until: threading.Event, last: list[int]):
    for event in source.follow(cid, after=1, idle=120):
        seen.append(event.version)
        if until.is_set() and event.version >= last[0]:
            return


@pytest.mark.parametrize("form", ["hosts", "params"])
def test_a_promoted_standby_takes_over_and_nothing_is_lost_or_doubled(pair, form) -> None:
    primary, standby = pair
    url = both(primary, standby, form)
    settings = Settings(actor="failover", connect_timeout=CONNECT_TIMEOUT)
    with ContextStore.from_url(url, settings) as store, served(store) as service_url:
        client = CtxStoreClient(service_url, token="token-acme")  # a tenant's token
        cids = [client.create(name=f"writer {i}") for i in range(4)]
        before = store.audit(limit=1000)
        cursor = before.cursor
        writers, ended, last = Writers(), threading.Event(), [0]
        in_process: list[int] = []
        over_http: list[int] = []
        threads = [
            threading.Thread(target=writers.sync, args=(store, cids[0], "store")),
            threading.Thread(target=writers.sync, args=(store, cids[1], "store")),
            threading.Thread(target=writers.awaited, args=(url, settings, cids[2])),
            threading.Thread(target=writers.sync, args=(client, cids[3], "http")),
            threading.Thread(target=_follow, args=(store, cids[0], in_process, ended, last)),
            threading.Thread(target=_follow, args=(client, cids[0], over_http, ended, last)),
        ]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 60  # (a loaded machine starts writers slowly)
        while not all(len(writers.acked[c]) >= 5 for c in cids):
            assert time.monotonic() < deadline, "every writer writes before the failover"
            time.sleep(0.1)
        primary.kill()
        time.sleep(0.5)
        standby.promote()
        promoted = time.monotonic()
        deadline = promoted + 60
        while not any(t > promoted for t in writers.acked_at):
            assert time.monotonic() < deadline, "no write went through after the promotion"
            time.sleep(0.05)
        resumed = min(t for t in writers.acked_at if t > promoted) - promoted
        time.sleep(1.0)
        writers.stop.set()
        for t in threads[:4]:
            t.join(timeout=60)
        last[0] = store.insert(cids[0], {"role": "user", "content": "the end"}).version
        ended.set()
        # A follower that read the last event before `ended` was set ends on the next one.
        store.insert(cids[0], {"role": "user", "content": "after the end"})
        for t in threads[4:]:
            t.join(timeout=60)
            assert not t.is_alive(), "a follower did not reach the last event"
        client.close()
        print(f"writes resumed {resumed:.2f} s after the promotion; "
              f"acknowledged {sum(map(len, writers.acked.values()))}, "
              f"refused {sum(map(len, writers.refused.values()))}, "
              f"unknown {len(writers.unknown)}")  # fmt: skip

        # Every event of the followed context once, in order, on both tails.
        for seen in (in_process, over_http):
            assert seen[: last[0] - 1] == list(range(2, last[0] + 1))
            assert seen[last[0] - 1 :] in ([], [last[0] + 1])

        # The cursor from before reads on: every event since, once.
        read: list[tuple[UUID, int]] = []
        while True:
            page = store.audit(after=cursor, limit=1000)
            read += [(e.context_id, e.version) for e in page.entries]
            cursor = page.cursor
            if not page.more:
                break
        heads = {c: store.visible(c).version for c in cids}
        assert Counter(read) == Counter((c, v) for c in cids for v in range(2, heads[c] + 1))

    # The new primary alone, read directly: nothing acknowledged lost, nothing doubled.
    with ContextStore.from_url(standby.url, settings) as after:
        for cid in cids:
            texts = Counter(m.content for m in after.visible(cid).messages)
            assert max(texts.values()) == 1, f"a turn stored twice: {texts.most_common(2)}"
            assert not set(writers.acked[cid]) - set(texts), "an acknowledged turn was lost"
            assert not set(writers.refused[cid]) & set(texts), "a refused turn was stored"
        for cid, text, command in writers.unknown:
            by_command = [e for e in after.history(cid) if e.command_id == command]
            assert len(by_command) <= 1
            assert (text in {m.content for m in after.visible(cid).messages}) == bool(by_command)

    # The old primary comes back as a standby of the new one (rebuilt from it): the same
    # URL writes to the new primary, and replica reads may come from the old one.
    old = standby.base_backup(pg_cluster.private_folder(), standby=True, port=primary.port)
    old.start()
    try:
        with psycopg.connect(old.url, autocommit=True) as conn:
            assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (True,)
        replica = f"{url}&replica=127.0.0.1:{old.port}"
        with ContextStore.from_url(replica, settings) as store:
            written = store.insert(cids[0], {"role": "user", "content": "after the rejoin"})
            assert written.version == last[0] + 2  # after "after the end"
            old.replayed(standby)
            assert store.history(cids[0])[-1].version == written.version
            assert store._replicas is not None and store._replicas.served["replica"] >= 1
    finally:
        old.stop()
        shutil.rmtree(old.data.parent, ignore_errors=True)
