"""Snapshot policy: when a context is snapshotted, and which older snapshots are deleted."""

from __future__ import annotations

from typing import Any

from eventsourcing.domain import Snapshot as LibrarySnapshot

from ctxstore.adapters.settings import Settings
from ctxstore.adapters.storage.snapshot_policy import step, superseded
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.domain.context import Context


def test_step_grows_with_the_state_from_the_interval():
    assert step(32, 0) == 32
    assert step(32, 127) == 32
    assert step(32, 128) == 64  # a power of two in (held/4, held/2]
    assert step(32, 1000) == 256
    assert step(500, 1000) == 500


def test_an_older_snapshot_goes_only_when_replaying_past_it_stays_short():
    assert superseded(64, 200, []) is None
    # From the start to 64 is 64 events, at most half of 200 held messages: 32 goes.
    assert superseded(64, 200, [32]) == 32
    assert superseded(64, 127, [32]) is None
    # The span counted is from the snapshot before the one that would go.
    assert superseded(256, 250, [192, 128]) is None  # 128 events > 125
    assert superseded(256, 256, [192, 128]) == 192
    assert superseded(256, 300, [224, 192]) == 224
    # A context with a long history and a small state keeps every snapshot.
    assert superseded(10_000, 50, [9_968, 9_936]) is None


def _snapshot_versions(store: ContextStore, cid: Any) -> list[int]:
    assert store._storage.snapshots is not None
    return [s.originator_version for s in store._storage.snapshots.recorder.select_events(cid)]


def _turn(i: int) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": f"question {i}"},
        {"role": "assistant", "content": f"answer {i} " + "words " * 20},
        {"role": "user", "content": f"thanks {i}"},
    ]


def test_a_growing_context_keeps_only_the_snapshots_reads_need(durable_url):
    with ContextStore.from_url(durable_url, Settings(snapshot_interval=8)) as s:
        cid = s.create()
        seen: dict[int, list[str]] = {}
        for i in range(120):
            w = s.insert(cid, _turn(i))
            seen[w.version] = [m.id for m in s.visible(cid).messages]
        kept = _snapshot_versions(s, cid)
        # Snapshots were taken at 8, 16, 32 and 64 (the step grows with the state);
        # with three messages an event, each made the one before it redundant.
        assert kept == [64]
        for version, ids in seen.items():  # every past version reads as it was written
            s._core.cache.drop(cid)
            assert [m.id for m in s.visible(cid, at_version=version).messages] == ids
        s._core.cache.drop(cid)
        assert [m.id for m in s.visible(cid).messages] == seen[max(seen)]
        assert s.verify().ok


def test_a_context_whose_history_outgrows_its_state_keeps_its_snapshots(durable_url):
    with ContextStore.from_url(durable_url, Settings(snapshot_interval=8)) as s:
        cid = s.create()
        s.insert(cid, [{"role": "user", "content": f"m{i}"} for i in range(10)])
        contents: dict[int, list[str]] = {}
        for i in range(60):
            w = s.replace(cid, i % 10, f"rewritten {i}")
            contents[w.version] = [m.text() for m in s.visible(cid).messages]
        assert _snapshot_versions(s, cid) == [8, 16, 24, 32, 40, 48, 56]
        for version in (9, 17, 30, 45, 61):
            s._core.cache.drop(cid)
            assert [m.text() for m in s.visible(cid, at_version=version).messages] == (
                contents[version]
            )


# ---- the snapshot's form: an open batch's copies are stored once -----------------------------


def _round_trip(store: ContextStore, snapshot: Any) -> Context:
    stored = store._storage.mapper.to_stored_event(snapshot)
    read = store._storage.mapper.to_domain_event(stored)
    assert isinstance(read, LibrarySnapshot)  # this form or the library's
    restored = read.mutate(None)
    assert isinstance(restored, Context)
    return restored


def _state(ctx: Context) -> dict[str, Any]:
    return {k: v for k, v in vars(ctx).items() if k != "_pending_events"}


def test_open_batches_copies_are_stored_once_and_read_back_whole():
    store = ContextStore.from_url("memory://")
    ctx = Context.start(
        name=None, metadata=None, encoding="cl100k_base", actor="t", tenant=None, context_id=None
    )
    for i in range(40):
        ctx.insert(_turn(i), actor="t")
    ctx.batch_start(actor="t")
    ctx.replace(0, {"role": "user", "content": "changed in batch 1"}, actor="t")
    ctx.delete([1, 2], actor="t")  # a turn's question and answer
    ctx.batch_start(actor="t")
    ctx.insert(_turn(99), actor="t")
    ctx.collect_events()

    snapshot = Context.Snapshot.take(ctx)
    form = store._storage.mapper.transcoder.encode(snapshot.state)
    full = store._storage.mapper.transcoder.encode(LibrarySnapshot.take(ctx).state)
    # Two open batches, each saving ~120 messages: in full, each repeats all of them.
    assert len(form) < 0.6 * len(full)  # (head entries are in both: at most ~1/3 + overhead)
    restored = _round_trip(store, snapshot)
    assert _state(restored) == _state(ctx)
    # The copies read back are the head's entries, not equal copies of them.
    kept = ctx.order[-1]
    assert (
        restored.savepoints[0]["entries"][restored.order[5]] is restored.entries[restored.order[5]]
    )
    assert kept in restored.entries

    for to in (1, 0):  # roll back each batch on both: the same states
        ctx.batch_end(to=to, actor="t")
        restored.batch_end(to=to, actor="t")
        assert _state(restored)["order"] == _state(ctx)["order"]
        assert restored.entries == ctx.entries and restored.tokens == ctx.tokens


def test_a_snapshot_in_the_library_s_form_still_reads():
    store = ContextStore.from_url("memory://")
    ctx = Context.start(
        name=None, metadata=None, encoding="cl100k_base", actor="t", tenant=None, context_id=None
    )
    ctx.insert(_turn(0), actor="t")
    ctx.batch_start(actor="t")
    ctx.insert(_turn(1), actor="t")
    ctx.collect_events()
    older = LibrarySnapshot.take(ctx)  # what stores wrote before: every copy in full
    assert all(e is not None for e in older.state["savepoints"][0]["entries"].values())
    restored = _round_trip(store, older)
    assert _state(restored) == _state(ctx)
    restored.batch_end(to=0, actor="t")
    assert len(restored.order) == len(_turn(0))


def _every_kind_of_entry(store: ContextStore) -> tuple[Any, Context]:
    """A stored context whose snapshot holds messages from inserts, a replace, a compress,
    a fork and an open batch's saved copies; and the same context built in memory."""
    source = store.create()
    store.insert(source, _turn(0))
    fork = store.fork(source, at_version=2)
    store.insert(
        fork, _turn(1) + [{"role": "user", "content": "日本語 ✓", "metadata": {"n": 2**70}}]
    )
    store.replace(fork, 1, {"role": "assistant", "content": "replaced"})
    store.compress(fork, [3, 4], "a summary")
    store.batch_start(fork)
    store.replace(fork, 0, {"role": "user", "content": "changed in the batch"})
    store.delete(fork, [-1])
    store.insert(fork, _turn(2))
    return fork, store._storage.get(fork)


def test_a_snapshot_is_stored_without_its_messages_and_reads_back_whole(durable_url):
    with ContextStore.from_url(durable_url, Settings(snapshot_interval=1000)) as store:
        cid, ctx = _every_kind_of_entry(store)
        assert store._storage.snapshots is not None
        store._storage.snapshots.put([Context.Snapshot.take(ctx)])
        row = store._storage.snapshots.recorder.select_events(cid, desc=True, limit=1)[0]
        plain = store._storage.mapper.plaintext(row.state, cid)
        assert b"messages_in_events" in plain
        assert b"replaced" not in plain and b"question" not in plain  # no message text
        read = next(store._storage.snapshots.get(cid, desc=True, limit=1))
        assert read.state == Context.Snapshot.take(ctx).state
        restored = read.mutate(None)
        assert _state(restored) == _state(ctx)
        restored.batch_end(to=0, actor="t")  # the batch's saved copies came back too
        ctx.batch_end(to=0, actor="t")
        assert restored.entries == ctx.entries and restored.order == ctx.order
        head = store.visible(cid)
    with ContextStore.from_url(durable_url) as cold:  # a new process: the snapshot, read
        assert cold.visible(cid) == head
        cold.batch_end(cid, to=0)
        assert [m.content for m in cold.visible(cid).messages][:2] == ["question 0", "replaced"]


def test_a_snapshot_naming_a_message_not_there_is_passed_over(durable_url, caplog):
    with ContextStore.from_url(durable_url, Settings(snapshot_interval=1000)) as store:
        cid, ctx = _every_kind_of_entry(store)
        assert store._storage.snapshots is not None
        snapshot = Context.Snapshot.take(ctx)
        wrong = {**snapshot.state["entries"][ctx.order[0]], "version": 1}  # the creation
        bad = type(snapshot)(
            originator_id=snapshot.originator_id,
            originator_version=snapshot.originator_version,
            timestamp=snapshot.timestamp,
            topic=snapshot.topic,
            state={**snapshot.state, "entries": {**snapshot.state["entries"], ctx.order[0]: wrong}},
        )
        store._storage.snapshots.put([bad])
        assert list(store._storage.snapshots.get(cid)) == []
        assert "passed over" in caplog.text
        store._core.cache.drop(cid)
        assert store.visible(cid).messages == [  # rebuilt from the events alone
            m for m in ctx.visible_messages()
        ]


def test_messages_a_snapshot_names_are_read_through_their_events_upcasting(
    durable_url, monkeypatch
):
    """When an event that adds messages gets a new schema version, the messages of events
    stored before it reach a snapshot's reader upcast, as replaying those events does."""
    with ContextStore.from_url(durable_url, Settings(snapshot_interval=1000)) as store:
        cid = store.create()
        store.insert(cid, _turn(0))
        assert store._storage.snapshots is not None
        store._storage.snapshots.put([Context.Snapshot.take(store._storage.get(cid))])

        def upcast_v1_v2(state: dict[str, Any]) -> None:
            for m in state["messages"]:
                m["content"] = m["content"].upper()

        monkeypatch.setattr(Context.MessagesInserted, "class_version", 2, raising=False)
        monkeypatch.setattr(
            Context.MessagesInserted, "upcast_v1_v2", staticmethod(upcast_v1_v2), raising=False
        )
        read = next(store._storage.snapshots.get(cid, desc=True, limit=1))
        held = [read.state["entries"][i]["message"]["content"] for i in read.state["order"]]
        assert held == [m["content"].upper() for m in _turn(0)]
