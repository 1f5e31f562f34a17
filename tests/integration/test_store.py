"""The store on every backend: same behaviour on memory, SQLite and PostgreSQL."""

import threading
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.domain.errors import (
    ContextNotFoundError,
    CtxStoreError,
    InvalidMessageError,
    InvalidOperationError,
    MalformedTranscriptError,
    UnknownBatchError,
    UnknownMessageError,
    VersionConflictError,
)
from ctxstore.domain.messages import Message

from ..conftest import examples


def user(text):
    return {"role": "user", "content": text}


def texts(store, cid, **kw):
    return [m.text() or ",".join(m.call_ids) for m in store.visible(cid, **kw).messages]


def test_operations_round_trip_through_storage(store):
    cid = store.create(name="s", metadata={"k": "v"}, actor="alice")
    w = store.insert(
        cid,
        [
            user("a"),
            {
                "role": "assistant",
                "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": "{}"}}],
            },
        ],
        actor="bob",
    )
    assert (w.version, w.batch, len(w.ids)) == (2, 0, 2)
    store.insert(cid, [{"role": "tool", "tool_call_id": "c1", "content": "ok"}, user("b")])
    store.replace(cid, w.ids[0], user("a2"))
    store.batch_start(cid)
    store.insert(cid, [user("temp")], after=0)
    assert texts(store, cid) == ["a2", "temp", "c1", "ok", "b"]
    store.batch_end(cid, to=0)
    assert texts(store, cid) == ["a2", "c1", "ok", "b"]
    s = store.compress(cid, [0, 1, 2], "summary of a2 and the call", stats={"by": "test"})
    v = store.visible(cid)
    assert [m.text() for m in v.messages] == ["summary of a2 and the call", "b"]
    assert v.summaries[s.ids[0]] == [w.ids[0], w.ids[1], v.summaries[s.ids[0]][2]]
    assert v.version == 8 and v.batch == 0
    hist = store.history(cid)
    assert [h.type for h in hist] == [
        "create",
        "insert",
        "insert",
        "replace",
        "batch_start",
        "insert",
        "batch_end",
        "compress",
    ]
    assert [h.reverted for h in hist] == [False] * 4 + [True, True, False, False]
    assert hist[0].actor == "alice" and hist[1].actor == "bob" and hist[2].actor == "tester"
    assert [h.version for h in store.history(cid, types=["insert"], from_version=3)] == [3, 6]
    with pytest.raises(InvalidOperationError, match="unknown event type"):
        store.history(cid, types=["bogus"])


def test_time_travel_shows_each_past_version(store):
    cid = store.create()
    seen = {}
    for n in range(12):  # crosses several snapshots (interval 5 in the fixture)
        w = store.insert(cid, [user(f"m{n}")])
        seen[w.version] = texts(store, cid)
        if n % 4 == 3:
            w = store.delete(cid, [0])
            seen[w.version] = texts(store, cid)
    for version, expected in seen.items():
        assert texts(store, cid, at_version=version) == expected
    assert texts(store, cid, at_version=1) == []
    with pytest.raises(InvalidOperationError, match="no version 99"):
        store.visible(cid, at_version=99)
    with pytest.raises(InvalidOperationError, match="positive"):
        store.visible(cid, at_version=0)
    hist = store.history(cid)
    assert texts(store, cid, at_time=hist[5].timestamp) == seen[6]


def test_bad_input_raises_a_typed_error_and_writes_nothing(store):
    cid = store.create()
    store.insert(
        cid,
        [
            user("a"),
            {"role": "assistant", "tool_calls": [{"id": "c1", "function": {"name": "f"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "r"},
        ],
    )
    before = len(store.history(cid))
    bad = [
        (ContextNotFoundError, lambda: store.insert(uuid.uuid4(), [user("x")])),
        (ContextNotFoundError, lambda: store.insert("not-a-uuid", [user("x")])),
        (InvalidMessageError, lambda: store.insert(cid, [{"role": "user"}])),
        (
            InvalidMessageError,
            lambda: store.insert(cid, [{"role": "user", "content": "x", "extra": float("nan")}]),
        ),
        (UnknownMessageError, lambda: store.delete(cid, ["nope"])),
        (UnknownMessageError, lambda: store.replace(cid, 7, user("x"))),
        (MalformedTranscriptError, lambda: store.delete(cid, [2])),
        (MalformedTranscriptError, lambda: store.compress(cid, [0, 1], "s")),
        (MalformedTranscriptError, lambda: store.insert(cid, [user("x")], after=1)),
        (InvalidOperationError, lambda: store.compress(cid, [0, 2], "s")),
        (UnknownBatchError, lambda: store.batch_end(cid)),
        (InvalidOperationError, lambda: store.insert(cid, [user("x")], actor="")),
        (VersionConflictError, lambda: store.insert(cid, [user("x")], expected_version=1)),
    ]
    for error, command in bad:
        with pytest.raises(error) as info:
            command()
        assert str(info.value)
    assert len(store.history(cid)) == before


def test_contexts_are_listed_and_unknown_ones_named(store):
    a = store.create(name="first", actor="ann")
    b = store.create(name="second")
    listed = [(c.context_id, c.name, c.created_by) for c in store.contexts()]
    assert listed[-2:] == [(a, "first", "ann"), (b, "second", "tester")]
    missing = uuid.uuid4()
    with pytest.raises(ContextNotFoundError, match=str(missing)):
        store.visible(missing)
    with pytest.raises(ContextNotFoundError, match=str(missing)):
        store.history(missing)


def test_snapshots_are_taken_and_a_cold_store_reads_the_same(durable_url):
    cfg = Settings(snapshot_interval=10, actor="t")
    with ContextStore.from_url(durable_url, cfg) as one:
        cid = one.create()
        for n in range(35):
            one.insert(cid, [user(f"m{n}")])
        one.batch_start(cid)
        one.delete(cid, [0, 1])
        head = one.visible(cid)
        snaps = list(one._storage.snapshots.get(cid)) if one._storage.snapshots else []
        assert [s.originator_version for s in snaps] == [10, 20, 30]
    with ContextStore.from_url(durable_url, cfg) as two:
        assert two.visible(cid) == head
        assert two.batches(cid)[0].opened_at_version == 37
        two.batch_end(cid, to=0)
        assert len(two.visible(cid).messages) == 35


def test_optimistic_concurrency_between_two_stores(durable_url):
    cfg = Settings(snapshot_interval=50, actor="t")
    with (
        ContextStore.from_url(durable_url, cfg) as one,
        ContextStore.from_url(durable_url, cfg) as two,
    ):
        cid = one.create()
        one.insert(cid, [user("from one")])
        two.visible(cid)  # two caches version 2
        one.insert(cid, [user("one again")])
        # two's cache is stale: without an expected version it retries on fresh state...
        w = two.insert(cid, [user("from two")])
        assert w.version == 4
        assert texts(one, cid) == ["from one", "one again", "from two"]
        # ...with one it reports the conflict and writes nothing.
        with pytest.raises(VersionConflictError, match="version 4, not 3"):
            one.insert(cid, [user("late")], expected_version=3)
        assert one.insert(cid, [user("on time")], expected_version=4).version == 5
        # A refusal judged on stale state is judged again on fresh state.
        first = one.visible(cid).messages[0].id
        two_stale = two.visible(cid)
        one.insert(cid, [user("new")])
        new_id = one.visible(cid).messages[-1].id
        assert two_stale.version == 5
        two.delete(cid, [new_id])
        assert texts(one, cid)[-1] == "on time" and first is not None


def test_threads_appending_to_one_context_lose_nothing(durable_url):
    cfg = Settings(snapshot_interval=7, actor="t")
    with ContextStore.from_url(durable_url, cfg) as a, ContextStore.from_url(durable_url, cfg) as b:
        cid = a.create()
        errors: list[BaseException] = []

        def writer(s: ContextStore, tag: str) -> None:
            try:
                for n in range(15):
                    s.insert(cid, [user(f"{tag}{n}")])
            except Exception as exc:  # noqa: BLE001 - reported by the assert below
                errors.append(exc)

        threads = [
            threading.Thread(target=writer, args=(s, t)) for s, t in ((a, "a"), (b, "b"), (a, "c"))
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        got = texts(b, cid)
        assert sorted(got) == sorted(f"{t}{n}" for t in "abc" for n in range(15))
        assert [h.version for h in a.history(cid)] == list(range(1, 47))


@settings(
    max_examples=examples(25),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_random_sequences_on_storage_match_the_model(
    data, store, store_url, reference_model, draw_operation, apply_operation
):
    model = reference_model()
    cid = store.create()
    counter = [0]
    at_version = {1: []}
    for _ in range(data.draw(st.integers(1, 30))):
        op = draw_operation(data, model, counter)
        expected_error = model.apply(op)
        try:
            w = apply_operation(store, cid, op)
        except CtxStoreError as exc:
            assert type(exc).__name__ == expected_error, (op, exc)
        else:
            assert expected_error is None, (op, expected_error)
            at_version[w.version] = [(i, Message.model_validate(m)) for i, m in model.items]
        v = store.visible(cid)
        assert [(m.id, m) for m in v.messages] == [
            (i, Message.model_validate(m)) for i, m in model.items
        ]
        assert v.batch == model.batch
    # Every past version, read back through snapshots, is what the model had then; the
    # token series (folded from the events) agrees with each version's visible context.
    series = {p.version: p for p in store.token_series(cid, points=2000).points}
    assert sorted(series) == list(range(1, store.visible(cid).version + 1))
    for version, expected in at_version.items():
        seen = store.visible(cid, at_version=version)
        assert [(m.id, m) for m in seen.messages] == expected
        assert (series[version].tokens, series[version].messages) == (
            seen.tokens,
            len(seen.messages),
        )
    # A cold store (no cache) replays to the same head.
    with ContextStore.from_url(store_url, Settings(snapshot_interval=5)) as cold:
        if store_url != "memory://":
            assert cold.visible(cid) == store.visible(cid)


def test_any_json_in_messages_and_metadata_reads_back_exactly(store_url):
    """User JSON shaped like the event library's tags must not be reinterpreted on read."""
    tricky = {"_type_": "uuid_hex", "_data_": "not a uuid"}
    with ContextStore.from_url(store_url, Settings(snapshot_interval=2)) as store:
        cid = store.create(metadata={"tag": tricky, "n": [1, 2.5, None, True]})
        message = {
            "role": "user",
            "content": [{"type": "text", "text": "hi"}, {"type": "custom", "payload": tricky}],
            "metadata": {"t": tricky, "deep": {"x": [tricky]}, "unicode": "日本語 ✓"},
        }
        store.insert(cid, [message, message | {"metadata": tricky}])
        store.compress(cid, [1], "s", stats=tricky)
        store._core.cache.drop(cid)  # read from storage: snapshot and events
        got = store.visible(cid).messages
        assert got[0].metadata == message["metadata"]
        assert got[0].model_dump(mode="json")["content"][1]["payload"] == tricky
        assert store.history(cid)[0].details["metadata"]["tag"] == tricky
        assert store.history(cid)[-1].details["stats"] == tricky
    scratch = ContextStore.from_url("memory://")
    with pytest.raises(InvalidOperationError, match="metadata"):
        scratch.create(metadata={"when": object()})
    with pytest.raises(InvalidMessageError, match="metadata"):
        scratch.insert(
            scratch.create(), [{"role": "user", "content": "x", "metadata": {"s": {1, 2}}}]
        )


def test_an_unreachable_database_is_a_typed_error_without_the_password():
    from ctxstore.domain.errors import StoreUnavailableError

    with pytest.raises(StoreUnavailableError) as info:
        ContextStore.from_url(
            "postgresql://postgres:s3cret@127.0.0.1:1/none", Settings(connect_timeout=1)
        )
    assert "s3cret" not in str(info.value) and "127.0.0.1:1" in str(info.value)


@settings(
    max_examples=examples(25),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_random_sequences_read_cold_before_every_command_match_the_model(
    data, durable_url, reference_model, draw_operation, apply_operation
):
    """Each command runs on the context as read from storage (the newest snapshot, with its
    open batches' saved copies, and the events after it), so rollbacks undo to what
    snapshots saved."""
    model = reference_model()
    with ContextStore.from_url(durable_url, Settings(snapshot_interval=2)) as store:
        cid = store.create()
        counter = [0]
        for _ in range(data.draw(st.integers(1, 30))):
            op = draw_operation(data, model, counter)
            expected_error = model.apply(op)
            store._core.cache.drop(cid)
            try:
                apply_operation(store, cid, op)
            except CtxStoreError as exc:
                assert type(exc).__name__ == expected_error, (op, exc)
            else:
                assert expected_error is None, (op, expected_error)
            store._core.cache.drop(cid)
            v = store.visible(cid)
            assert [(m.id, m) for m in v.messages] == [
                (i, Message.model_validate(m)) for i, m in model.items
            ]
            assert v.batch == model.batch


def test_messages_without_audio_are_stored_as_before_it_existed(durable_url):
    spoken = {"role": "assistant", "content": None, "audio": {"id": "audio_9"}}
    with ContextStore.from_url(durable_url) as store:
        cid = store.create()
        store.insert(cid, [user("say it"), spoken])
        held = store._storage.mapper.to_domain_event(
            store._storage.recorder.select_events(cid)[-1]
        ).messages
        assert "audio" not in held[0] and held[1]["audio"] == {"id": "audio_9"}
        for _ in range(40):  # past a snapshot
            store.insert(cid, user("more"))
    with ContextStore.from_url(durable_url) as cold:  # read from the snapshot
        got = cold.visible(cid).messages
        assert got[0].audio is None and got[1].audio is not None and got[1].audio.id == "audio_9"
