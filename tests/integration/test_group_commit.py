"""Group commit on SQLite (adapters/storage/group_commit.py): appends from several threads
share a transaction, and each still succeeds or fails alone."""

from __future__ import annotations

import threading
import time

from eventsourcing.persistence import IntegrityError

from ctxstore.adapters.store.facade import ContextStore


def _together(group, append, n: int) -> None:
    """Run `append(i)` for i < n on threads of their own, all queued before one leads."""
    threads = [threading.Thread(target=append, args=(i,)) for i in range(n)]
    with group._leading:  # the leader's place held until all of them are queued
        for t in threads:
            t.start()
        deadline = time.monotonic() + 30
        while len(group._queue) < n:
            assert time.monotonic() < deadline, "the appends did not queue"
            time.sleep(0.005)
    for t in threads:
        t.join(timeout=30)


def test_appends_queued_together_share_one_commit_and_fail_alone(tmp_path):
    with ContextStore.from_url(f"sqlite:///{tmp_path / 'g.db'}") as store:
        cids = [store.create(name=f"c{i}") for i in range(8)]
        group = store._storage.recorder.group
        insert, refused = group.insert, []

        def one_refused(curs, events, erasures):
            # The fourth context's first append finds its version taken (a racing writer).
            if events[0].originator_id == cids[3] and not refused:
                refused.append(events[0].originator_version)
                raise IntegrityError("UNIQUE constraint failed: a racing writer")
            return insert(curs, events, erasures)

        group.insert = one_refused
        written: dict[int, int] = {}

        def append(i: int) -> None:
            written[i] = store.insert(cids[i], {"role": "user", "content": f"m{i}"}).version

        commits = group.commits
        _together(group, append, 8)
        assert written == {i: 2 for i in range(8)}
        assert refused == [2]  # refused alone, then stored by its writer's retry
        assert group.commits - commits == 2  # the eight together, then the retry
        for i, cid in enumerate(cids):
            assert [m.content for m in store.visible(cid).messages] == [f"m{i}"]
        assert store.verify().broken == []
        assert [e.version for e in store.audit(context_id=cids[3]).entries] == [1, 2]


def test_a_failed_commit_stores_nothing_of_its_group(tmp_path, monkeypatch):
    """The commit fails (a full disk): every append of the group hears it as a typed error,
    none is stored, and the store takes appends again afterwards."""
    import sqlite3

    from eventsourcing.sqlite import SQLiteConnection

    with ContextStore.from_url(f"sqlite:///{tmp_path / 'g.db'}") as store:
        cids = [store.create(name=f"c{i}") for i in range(4)]
        group = store._storage.recorder.group
        outcomes: dict[int, str] = {}

        def append(i: int) -> None:
            try:
                store.insert(cids[i], {"role": "user", "content": f"m{i}"})
                outcomes[i] = "stored"
            except Exception as exc:  # noqa: BLE001 - the test names what it got
                outcomes[i] = type(exc).__name__

        leading, lead, commit = threading.local(), group._lead, SQLiteConnection.commit

        def led() -> None:
            leading.on = True
            try:
                lead()
            finally:
                leading.on = False

        def full(self):
            if getattr(leading, "on", False):  # the group's commit, no other
                raise sqlite3.OperationalError("database or disk is full")
            return commit(self)

        with monkeypatch.context() as m:
            m.setattr(SQLiteConnection, "commit", full)
            m.setattr(group, "_lead", led)
            _together(group, append, 4)
        assert set(outcomes.values()) == {"StoreUnavailableError"}, outcomes
        for cid in cids:
            assert store.visible(cid).messages == []
        assert store.insert(cids[0], {"role": "user", "content": "again"}).version == 2
        assert store.verify().broken == []


def test_threads_racing_on_shared_contexts_store_each_acknowledged_append_once(tmp_path):
    """Six threads append to three shared contexts (their versions race inside the groups)
    while a seventh erases a fourth context they also write to: every acknowledged append
    is stored once, none refused is stored, every chain verifies."""
    from collections import Counter

    from ctxstore.domain.errors import ContextNotFoundError

    with ContextStore.from_url(f"sqlite:///{tmp_path / 'g.db'}") as store:
        shared = [store.create(name=f"s{i}") for i in range(3)]
        doomed = store.create(name="doomed")
        acked: list[tuple[object, str]] = []
        refused: list[str] = []

        def write(w: int) -> None:
            for n in range(40):
                cid = doomed if n % 10 == 5 else shared[(w + n) % 3]
                text = f"w{w}-{n}"
                try:
                    store.insert(cid, {"role": "user", "content": text})
                    acked.append((cid, text))
                except ContextNotFoundError:
                    refused.append(text)

        threads = [threading.Thread(target=write, args=(w,)) for w in range(6)]
        for t in threads:
            t.start()
        time.sleep(0.05)
        store.erase(doomed, reason="racing the writers")
        for t in threads:
            t.join(timeout=60)
        stored = Counter((cid, m.content) for cid in shared for m in store.visible(cid).messages)
        assert all(n == 1 for n in stored.values())
        assert {k for k in acked if k[0] != doomed} == set(stored)
        assert not set(refused) & {text for _, text in stored}
        assert store.verify().broken == []
        assert sum(len(store.visible(c).messages) for c in shared) == len(stored)
        group = store._storage.recorder.group
        assert group.commits < group.appends  # (groups formed: ~220 appends in ~120 commits)
