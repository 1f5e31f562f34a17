"""Retention's keep_latest: a context's older events removed, a snapshot at the bound as its
new origin, the chain re-anchored by a signed checkpoint; reads and time travel from the
bound on as before, before it a clear HistoryRemovedError; verify still proves the rest."""

from __future__ import annotations

import copy

import pytest
from eventsourcing.cryptography import AESCipher
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import SecretStr

from ctxstore import HistoryRemovedError
from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.domain.messages import Message

from ..conftest import examples


def _texts(store: ContextStore, cid, version=None) -> list[str]:
    view = store.visible(cid) if version is None else store.visible(cid, at_version=version)
    return [m.text() for m in view.messages]


def _grow(store: ContextStore, cid, rounds: int) -> None:
    for n in range(rounds):
        store.insert(cid, [{"role": "user", "content": f"question {n}"}])
        if n % 7 == 3:
            store.batch_start(cid)
            store.insert(cid, [{"role": "assistant", "content": f"draft {n}"}])
            store.batch_end(cid, keep=n % 2 == 0)
        if n == 12:
            first = store.visible(cid).messages
            ids = [str(first[0].id), str(first[1].id)]
            store.compress(cid, ids, {"role": "system", "content": "summary"})


@pytest.mark.parametrize("keys", [False, True], ids=["plain", "keys"])
def test_keep_latest_removes_old_events_and_the_rest_still_reads_and_verifies(durable_url, keys):
    key = SecretStr(AESCipher.create_key(32)) if keys else None
    settings = Settings(snapshot_interval=8, encryption_key=key)
    with ContextStore.from_url(durable_url, settings) as store:
        cid = store.create(name="long")
        other = store.create(name="other")
        _grow(store, cid, 30)
        store.insert(other, [{"role": "user", "content": "short"}])
        head = store.visible(cid).version
        before = {v: _texts(store, cid, v) for v in range(1, head + 1)}
        history = [(h.version, h.type) for h in store.history(cid)]
        store.admin.set_retention(None, keep_latest=10, context_id=cid, actor="dpo", yes=True)
        sweep = store.admin.sweep()
        bound = head - 10
        assert sweep.trimmed == {str(cid): bound - 1} and sweep.expired == []
        assert store.admin.sweeps()[0].trimmed == {str(cid): bound - 1}

        assert _texts(store, cid) == before[head]
        for v in [1, *range(bound, head + 1)]:
            assert _texts(store, cid, v) == before[v], v
        for v in (2, bound - 1):
            with pytest.raises(HistoryRemovedError, match=f"versions 2..{bound - 1}"):
                store.visible(cid, at_version=v)
        kept = [(h.version, h.type) for h in store.history(cid)]
        assert kept == [history[0], (bound, "retention"), *history[bound:]]
        assert store.diff(cid, bound, head).to_version == head
        assert store.verify().ok and store.verify(cid).ok
        rows = store._core.storage.recorder.select_events(cid)
        assert [r.originator_version for r in rows] == [1, *range(bound + 1, head + 1)]
        audit = store.audit(context_id=cid, limit=1000).entries
        assert [e.version for e in audit] == [1, *range(bound + 1, head + 1)]
        assert store.admin.sweep().trimmed == {}  # not worth another trim yet

        store.insert(cid, [{"role": "user", "content": "after the trim"}])
        assert _texts(store, cid)[-1] == "after the trim"
    with ContextStore.from_url(durable_url, settings) as store:  # cold: from the origin snapshot
        assert _texts(store, cid)[:-1] == before[head]
        assert _texts(store, cid, bound) == before[bound]
        assert store.verify().ok
        assert _texts(store, other) == ["short"]
        record = store.erase(cid, reason="done")
        assert record.events == head - bound + 2
        assert store._core.storage.retention.checkpoints(cid.hex) == {}


def test_an_altered_checkpoint_fails_verification(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    with ContextStore.from_url(url, Settings(snapshot_interval=8)) as store:
        cid = store.create(name="c")
        _grow(store, cid, 30)
        store.admin.set_retention(None, keep_latest=5, context_id=cid, yes=True)
        assert store.admin.sweep().trimmed
        assert store.verify(cid).ok
        import sqlite3

        with sqlite3.connect(tmp_path / "s.db") as db:
            db.execute("UPDATE ctxstore_checkpoints SET chain = ?", ("0" * 64,))
        store._core.bounds.forget(cid)
        found = store.verify(cid)
        assert not found.ok and "checkpoint" in found.broken[0].reason


def test_another_process_with_the_old_state_cached_cannot_break_the_bounded_context(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    settings = Settings(snapshot_interval=8)
    with ContextStore.from_url(url, settings) as a, ContextStore.from_url(url, settings) as b:
        cid = a.create(name="c")
        _grow(a, cid, 30)
        head = a.visible(cid).version
        assert b.visible(cid).version == head  # b caches the state from before the trim
        a.admin.set_retention(None, keep_latest=6, context_id=cid, yes=True)
        assert a.admin.sweep().trimmed
        for n in range(12):  # past the snapshot interval: b snapshots what it cached
            b.insert(cid, [{"role": "user", "content": f"late {n}"}])
        expected = _texts(b, cid)
        assert len(b.history(cid, changes=True)) > 12
        steps = list(b.replay(cid))
        assert [s.event.type for s in steps][:2] == ["create", "retention"]
        assert [m.text() for m in steps[-1].visible.messages] == expected
    with ContextStore.from_url(url, settings) as c:
        assert _texts(c, cid) == expected
        assert _texts(c, cid, head)[-1] == "question 29"
        assert c.verify().ok
        assert c.token_series(cid).points[-1].version == c.visible(cid).version


@settings(
    max_examples=examples(12),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_random_histories_bounded_anywhere_read_as_the_reference_model(
    data, tmp_path_factory, reference_model, draw_operation, apply_operation
):
    folder = tmp_path_factory.mktemp("bound")
    settings_ = Settings(
        snapshot_interval=data.draw(st.integers(2, 9), label="snapshot interval"),
        encryption_key=SecretStr(AESCipher.create_key(32)),
    )
    with ContextStore.from_url(f"sqlite:///{folder / 's.db'}", settings_) as store:
        model = reference_model()
        cid = store.create()
        counter = [0]
        seen: dict[int, list] = {1: []}
        for _ in range(data.draw(st.integers(25, 50), label="operations")):
            op = draw_operation(data, model, counter)
            if model.apply(op) is None:
                version = apply_operation(store, cid, op).version
                seen[version] = [(i, Message.model_validate(m)) for i, m in model.items]
        head = store.visible(cid).version
        keep = data.draw(st.integers(1, max(1, head - 2)), label="keep_latest")
        store.admin.set_retention(None, keep_latest=keep, context_id=cid, yes=True)
        bound = head - keep
        store._core.bounds.trim(cid, keep)  # the sweep's step, whatever the slack
        for version, items in seen.items():
            if 1 < version < bound:
                with pytest.raises(HistoryRemovedError):
                    store.visible(cid, at_version=version)
                continue
            v = store.visible(cid, at_version=version)
            assert [(m.id, m) for m in v.messages] == items, version
        for _ in range(data.draw(st.integers(0, 12), label="operations after")):
            op = draw_operation(data, model, counter)  # rollbacks across the bound too
            trial = copy.deepcopy(model)
            if trial.apply(op) is None:
                try:
                    apply_operation(store, cid, op)
                except HistoryRemovedError:
                    assert op[0] == "expand", op  # what it covers went with the removed events
                    continue
                model = trial
                v = store.visible(cid)
                assert [(m.id, m) for m in v.messages] == [
                    (i, Message.model_validate(m)) for i, m in model.items
                ]
        assert store.verify(cid).ok
        steps = [h.version for h in store.history(cid, changes=True)]
        assert steps == sorted(steps) and steps[-1] == store.visible(cid).version
    with ContextStore.from_url(f"sqlite:///{folder / 's.db'}", settings_) as cold:
        assert [(m.id, m) for m in cold.visible(cid).messages] == [
            (i, Message.model_validate(m)) for i, m in model.items
        ]
