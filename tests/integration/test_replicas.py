"""Reads from a real streaming replica: a primary and a hot standby this test starts on
their own ports (pg_basebackup -R), never the shared server. Audit, history, diff, replay,
model calls, token series and exports read from the replica; a client reads its own
writes when the replica is behind (replay paused) and when it is stopped."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from ctxstore.adapters.settings import Settings
from ctxstore.adapters.storage.urls import replica_urls
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.domain.errors import StoreURLError

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import pg_cluster

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.slow,
]  # slow: servers of its own: a primary and replicas


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[Any, Any]]:
    if not pg_cluster.available():
        pytest.fail("PostgreSQL 15's binaries are needed to start a primary and a standby")
    with pg_cluster.private_cluster() as primary:
        standby = primary.base_backup(pg_cluster.private_folder(), standby=True)
        standby.start()
        try:
            yield primary, standby
        finally:
            standby.thaw()
            standby.stop()


def _pause(standby: Any, paused: bool) -> None:
    with psycopg.connect(standby.url, autocommit=True) as s:
        s.execute("SELECT pg_wal_replay_pause()" if paused else "SELECT pg_wal_replay_resume()")


def _served(store: ContextStore) -> dict[str, int]:
    assert store._replicas is not None
    return store._replicas.served


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def test_reads_come_from_the_replica_and_match_the_primary(servers) -> None:
    primary, standby = servers
    with ContextStore.from_url(primary.url, Settings(actor="a"), replicas=[standby.url]) as s:
        cid = s.create(name="r")
        for i in range(6):
            s.insert(cid, [user(f"m{i}")])
        s.record_usage(cid, model="gpt-4o", prompt_tokens=10, completion_tokens=3)
        standby.replayed(primary)
        with ContextStore.from_url(primary.url, Settings(actor="a")) as only_primary:
            for read in (
                lambda st: st.audit(context_id=cid).entries,
                lambda st: st.history(cid),
                lambda st: st.diff(cid, 2, 5),
                lambda st: list(st.replay(cid)),
                lambda st: st.calls(cid),
                lambda st: st.token_series(cid),
                lambda st: list(st.export_events(cid)),
                lambda st: st.visible(cid, at_version=4),
            ):
                before = _served(s)["replica"]
                assert read(s) == read(only_primary)
                assert _served(s)["replica"] == before + 1, "not read from the replica"


def test_a_client_reads_its_own_writes_while_the_replica_is_behind(servers) -> None:
    primary, standby = servers
    settings = Settings(actor="a")
    with ContextStore.from_url(primary.url, settings, replicas=[standby.url]) as s:
        cid = s.create(name="behind")
        s.insert(cid, [user("one")])
        standby.replayed(primary)
        _pause(standby, True)
        try:
            s.insert(cid, [user("two")])  # the replica does not have it
            served = dict(_served(s))
            assert [e.version for e in s.audit(context_id=cid).entries] == [1, 2, 3]
            assert len(s.history(cid)) == 3
            assert _served(s)["primary"] == served["primary"] + 2  # not the replica
        finally:
            _pause(standby, False)
        standby.replayed(primary)
        served = dict(_served(s))
        assert len(s.history(cid)) == 3
        assert _served(s)["replica"] == served["replica"] + 1  # caught up: replica


def test_a_client_waits_for_a_replica_behind_when_told_to(servers) -> None:
    primary, standby = servers
    settings = Settings(actor="a", replica_wait=5.0)
    with ContextStore.from_url(primary.url, settings, replicas=[standby.url]) as s:
        cid = s.create(name="wait")
        standby.replayed(primary)
        _pause(standby, True)
        s.insert(cid, [user("one")])
        threading.Timer(0.5, _pause, (standby, False)).start()
        # The replica lacks the write when the read starts; it answers all the same,
        # so the read waited for it to resume (the primary answered nothing).
        assert len(s.history(cid)) == 2
        assert _served(s) == {"replica": 1, "primary": 0}


def test_a_stopped_replica_leaves_reads_to_the_primary(servers) -> None:
    primary, standby = servers
    with ContextStore.from_url(primary.url, Settings(actor="a"), replicas=[standby.url]) as s:
        cid = s.create(name="stopped")
        s.insert(cid, [user("one")])
        standby.replayed(primary)
        assert len(s.history(cid)) == 2
        standby.stop()
        try:
            s.insert(cid, [user("two")])
            assert len(s.history(cid)) == 3  # from the primary, no error
            assert [e.version for e in s.audit(context_id=cid).entries] == [1, 2, 3]
        finally:
            standby.start()


def test_replicas_by_url_and_by_settings() -> None:
    primary, replicas = replica_urls(
        "postgresql://u:pw@db1:5432/app?schema=s&replica=db2:5433&replica=db3"
    )
    assert primary == "postgresql://u:pw@db1:5432/app?schema=s"
    assert replicas == [
        "postgresql://u:pw@db2:5433/app?schema=s",
        "postgresql://u:pw@db3:5432/app?schema=s",
    ]
    assert Settings(replicas="postgresql://a/x, postgresql://b/x").replicas == [
        "postgresql://a/x",
        "postgresql://b/x",
    ]
    with pytest.raises(StoreURLError):
        replica_urls("sqlite:///x.db?replica=db2")
    # The primary's hosts may be several; its replicas are standbys, read from as they are.
    primary, replicas = replica_urls(
        "postgresql://u@db1:5432,db2:5432/app?target_session_attrs=read-write&replica=db2"
    )
    assert primary == "postgresql://u@db1:5432,db2:5432/app?target_session_attrs=read-write"
    assert replicas == ["postgresql://u@db2:5432/app"]
    _, replicas = replica_urls(
        "postgresql://u@/app?host=db1,db2&port=5432,5433&sslmode=require&replica=db2:5433"
    )
    assert replicas == ["postgresql://u@db2:5433/app?sslmode=require"]
