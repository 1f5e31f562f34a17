"""Audit and replay debugging on every backend: audit queries, history with changes, diff,
replay, model calls, fork, export/import, transcript import and tamper evidence."""

import json
import sqlite3
import threading
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlsplit

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.domain.errors import (
    ContextExistsError,
    ContextNotFoundError,
    CtxStoreError,
    InvalidImportError,
    InvalidMessageError,
    InvalidOperationError,
    MalformedTranscriptError,
    UnknownMessageError,
)

from ..conftest import examples


def user(text):
    return {"role": "user", "content": text}


def call(cid_):
    return {
        "role": "assistant",
        "tool_calls": [
            {"id": cid_, "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    }


def tool(cid_, text="ok"):
    return {"role": "tool", "tool_call_id": cid_, "content": text}


def scripted(store):
    """A context through every operation; returns its id and the ids inserted first."""
    cid = store.create(name="scripted", actor="alice")
    w = store.insert(cid, [user("a"), call("c1"), tool("c1"), user("b")], actor="alice")  # v2
    store.batch_start(cid, actor="bob")  # v3
    store.insert(cid, [user("temp")], actor="bob")  # v4
    store.replace(cid, w.ids[0], user("a, edited"), actor="bob")  # v5
    store.batch_end(cid, to=0, actor="bob")  # v6: undoes v3..v5
    store.compress(cid, w.ids[:3], "a and the call", actor="carol")  # v7
    store.delete(cid, [-1], actor="carol")  # v8
    return cid, w.ids


# ---- audit queries ----------------------------------------------------------------------


def test_audit_filters_pages_and_follows_across_contexts(store):
    one, _ = scripted(store)
    two = store.create(name="other", actor="dave")
    store.insert(two, [user("x")], actor="dave")
    everything = store.audit(limit=1000).entries
    assert [e.position for e in everything] == sorted(e.position for e in everything)
    assert len(everything) == 8 + 2
    assert [(e.context_id, e.version) for e in everything if e.context_id == one] == [
        (one, v) for v in range(1, 9)
    ]
    bob = store.audit(actor="bob").entries
    assert [(e.version, e.type, e.reverted_by) for e in bob] == [
        (3, "batch_start", 6), (4, "insert", 6), (5, "replace", 6), (6, "batch_end", None),
    ]  # fmt: skip
    assert [e.type for e in store.audit(types=["insert"], context_id=two).entries] == ["insert"]
    assert {e.context_id for e in store.audit(types=["create"]).entries} == {one, two}
    # A stable cursor: page by page gives everything once, in order.
    seen, cursor = [], 0
    while True:
        page = store.audit(after=cursor, limit=3)
        seen += page.entries
        cursor = page.cursor
        if not page.more:
            break
    assert [e.position for e in seen] == [e.position for e in everything]
    # Following: nothing new, then exactly the new event.
    assert store.audit(after=cursor).entries == []
    store.insert(two, [user("y")], actor="erin")
    new = store.audit(after=cursor).entries
    assert [(e.context_id, e.actor, e.message_ids != []) for e in new] == [(two, "erin", True)]


def test_audit_time_range(store):
    cid = store.create(actor="alice")
    store.insert(cid, [user("now")], actor="alice")
    now = datetime.now(UTC)
    assert len(store.audit(since=now - timedelta(hours=1)).entries) == 2
    assert store.audit(since=now + timedelta(seconds=5)).entries == []
    assert store.audit(until=now - timedelta(hours=1)).entries == []
    first = store.audit().entries[0].timestamp
    assert [e.version for e in store.audit(until=first + timedelta(microseconds=1)).entries] == [1]


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"types": ["nope"]}, "unknown event type"),
        ({"limit": 0}, "limit"),
        ({"limit": 5000}, "limit"),
        ({"after": -1}, "after"),
        ({"since": datetime(2026, 1, 1)}, "timezone"),
        ({"context_id": "not-a-uuid"}, "not a UUID"),
    ],
)
def test_audit_bad_queries_are_refused(store, kwargs, needle):
    with pytest.raises(CtxStoreError, match=needle):
        store.audit(**kwargs)


def test_a_second_store_and_concurrent_readers_index_each_event_once(durable_url):
    with ContextStore.from_url(durable_url) as a, ContextStore.from_url(durable_url) as b:
        cid = a.create(actor="a")
        for n in range(30):
            a.insert(cid, [user(f"m{n}")], actor="a")
        results = []

        def read(s):
            results.append([e.position for e in s.audit(limit=1000).entries])

        threads = [threading.Thread(target=read, args=(s,)) for s in (a, b, a, b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(results) == 4 and all(r == results[0] for r in results)
        assert len(results[0]) == 31 == len(set(results[0]))
        b.insert(cid, [user("from b")], actor="b")
        assert [e.actor for e in a.audit(after=results[0][-1]).entries] == ["b"]


def test_an_erasure_between_reading_a_page_and_indexing_it_leaves_no_rows(store_url, monkeypatch):
    """An indexer (another process's audit read) read the context's newest events, then the
    context was erased, then the indexer stores its page: no row of the erased context is
    left (they would describe what was erased, and hide the events of a context made again
    under the same id, as a session store does)."""
    from ctxstore.adapters.store import history_surface

    with ContextStore.from_url(store_url) as store:
        cid = store.create(actor="a")
        for n in range(3):
            store.insert(cid, [user(f"m{n}")], actor="a")
        view = store._storage.audit_index
        real = view.project

        def erased_meanwhile(*args, **kwargs):
            view.project = real
            with monkeypatch.context() as m:
                # The erasing process indexed before these events were appended.
                m.setattr(history_surface.audit, "catch_up", lambda core: 0)
                store.erase(cid, reason="asked")
            return real(*args, **kwargs)

        view.project = erased_meanwhile
        assert store.audit(context_id=cid).entries == []
        assert view.project is real, "the page was indexed after the erasure"
        store.create(context_id=cid, actor="b")
        store.insert(cid, [user("again")], actor="b")
        found = store.audit(context_id=cid).entries
        assert [(e.version, e.actor) for e in found] == [(1, "b"), (2, "b")]


@pytest.mark.parametrize("keyed", [False, True])
def test_an_erasure_after_the_indexer_read_a_page_fails_no_audit_read(
    durable_url, monkeypatch, keyed
):
    """Another process erased a context after this one read a page holding its events and
    before it decoded them (with keys: its key is destroyed) or looked up the context's
    tenant: the audit read goes on without the erased events. (It raised, naming a
    context the caller never asked about.)"""
    from eventsourcing.cryptography import AESCipher
    from pydantic import SecretStr

    from ctxstore.adapters.store import history_surface

    settings = Settings(
        encryption_key=SecretStr(AESCipher.create_key(32)) if keyed else None, actor="a"
    )
    with ContextStore.from_url(durable_url, settings) as writer:
        kept = writer.create()
        gone = writer.create()
        writer.audit()  # indexed here: the reader below never sees the creations
        writer.insert(gone, [user("soon gone")])
        writer.insert(kept, [user("stays")])
        with ContextStore.from_url(durable_url, settings) as reader:
            view = reader._storage.audit_index
            real = view.unindexed

            def erased_after_reading(*args, **kwargs):
                page = real(*args, **kwargs)
                if page.entries:
                    monkeypatch.setattr(view, "unindexed", real)
                    with monkeypatch.context() as m:
                        m.setattr(history_surface.audit, "catch_up", lambda core: 0)
                        writer.erase(gone, reason="asked")
                return page

            monkeypatch.setattr(view, "unindexed", erased_after_reading)
            found = [(e.context_id, e.version) for e in reader.audit().entries]
        assert found == [(kept, 1), (kept, 2)]


def test_a_cursor_past_an_erased_context_reads_the_events_written_after_it(store_url):
    """The newest events erased: the events written next take new positions, after every
    cursor handed out (SQLite would give the erased rowids out again)."""
    with ContextStore.from_url(store_url) as store:
        kept = store.create(actor="a")
        gone = store.create(actor="a")
        for n in range(3):
            store.insert(gone, [user(f"g{n}")], actor="a")
        cursor = store.audit().cursor
        store.erase(gone, reason="asked")
        store.insert(kept, [user("after")], actor="b")
        found = store.audit(after=cursor).entries
        assert [(e.context_id, e.version, e.actor) for e in found] == [(kept, 2, "b")]
        assert store.audit(after=cursor).entries == found


@pytest.mark.postgres
def test_an_audit_read_sees_another_store_s_write_while_an_older_transaction_runs(
    pg_url, pg_admin_dsn
):
    """The horizon of running transactions is the server's: a transaction begun before
    another process's append holds that append back from cursors; a read that starts after
    the append was acknowledged waits for it (a client reads what it was told is stored)."""
    with ContextStore.from_url(pg_url) as a, ContextStore.from_url(pg_url) as b:
        cid = a.create(actor="a")
        head = a.audit().cursor
        with psycopg.connect(pg_admin_dsn, autocommit=True) as older:
            older.execute("BEGIN")
            older.execute("SELECT pg_current_xact_id()")  # a transaction id, held open
            b.insert(cid, [user("from b")], actor="b")
            ended = threading.Timer(0.5, lambda: older.execute("COMMIT"))
            ended.start()
            try:
                assert [e.actor for e in a.audit(after=head).entries] == ["b"]
            finally:
                ended.join()


# ---- per-context history, diff, replay ------------------------------------------------------


def test_history_says_what_each_event_changed(store):
    cid, ids = scripted(store)
    h = {e.version: e for e in store.history(cid, changes=True)}
    assert [m.id for m in h[2].changes.added] == ids and h[2].changes.tokens_delta > 0
    assert [m.preview for m in h[4].changes.added] == ["temp"]
    assert [m.preview for m in h[5].changes.changed] == ["a, edited"]
    rollback = h[6].changes
    assert [m.preview for m in rollback.removed] == ["temp"]
    assert [m.preview for m in rollback.changed] == ["a"]
    assert all(h[v].reverted and h[v].reverted_by == 6 for v in (3, 4, 5))
    assert [m.id for m in h[7].changes.removed] == ids[:3]
    assert [m.preview for m in h[7].changes.added] == ["a and the call"]
    assert [m.preview for m in h[8].changes.removed] == ["b"]
    assert sum(e.changes.tokens_delta for e in h.values()) == store.visible(cid).tokens - 3
    ranged = store.history(cid, from_version=4, to_version=6, types=["insert", "batch_end"])
    assert [e.version for e in ranged] == [4, 6]


def test_diff_between_versions(store):
    cid, ids = scripted(store)
    d = store.diff(cid, 2, 5)
    assert [m.preview for m in d.added] == ["temp"]
    assert [(a.preview, b.preview) for a, b in d.changed] == [("a", "a, edited")]
    assert d.removed == [] and d.changed[0][1].message["content"] == "a, edited"
    d = store.diff(cid, 2, 8)
    assert [m.id for m in d.removed] == ids
    assert [m.preview for m in d.added] == ["a and the call"]
    assert d.tokens_delta == store.visible(cid).tokens - store.visible(cid, at_version=2).tokens
    assert store.diff(cid, 6, 2).added == [] and store.diff(cid, 2, 6).tokens_delta == 0
    with pytest.raises(InvalidOperationError, match="no version 99"):
        store.diff(cid, 1, 99)
    with pytest.raises(InvalidOperationError, match="positive"):
        store.diff(cid, 0, 2)


def test_replay_yields_each_event_with_the_visible_context_after_it(store):
    cid, _ = scripted(store)
    steps = list(store.replay(cid))
    assert [e.version for e, _, _ in steps] == list(range(1, 9))
    for event, visible, _ in steps:
        assert visible == store.visible(cid, at_version=event.version)
        assert event.changes is not None
    tail = list(store.replay(cid, from_version=5, to_version=7))
    assert [s.event.version for s in tail] == [5, 6, 7]
    assert [s.visible for s in tail] == [s.visible for s in steps[4:7]]
    with pytest.raises(InvalidOperationError, match="versions 1..8"):
        list(store.replay(cid, to_version=9))
    with pytest.raises(ContextNotFoundError):
        list(store.replay("00000000-0000-0000-0000-000000000000"))


# ---- what the model saw ---------------------------------------------------------------------


def test_a_recorded_call_gives_back_exactly_what_was_sent(store):
    cid = store.create()
    for n in range(12):
        store.insert(
            cid,
            [
                user(f"question {n} " + "words " * 30),
                {"role": "assistant", "content": f"answer {n}"},
            ],
        )
    whole = store.record_usage(cid, model="m1", prompt_tokens=500)
    prompt = store.build_prompt(cid, 400, "full")
    assert prompt.added, "the full strategy writes a marker where it dropped turns"
    store.record_usage(cid, model="m2", prompt_tokens=prompt.tokens + 1, prompt=prompt)
    store.insert(cid, [user("later")])
    first, second = store.calls(cid)
    assert (first.number, first.whole_context, first.for_version) == (1, True, whole.version - 1)
    assert (second.model, second.whole_context, second.for_version) == ("m2", False, prompt.version)
    assert second.counted_tokens == prompt.tokens
    assert store.call(cid, 2).messages == prompt.messages
    assert store.call(cid, -1).messages == prompt.messages
    assert store.call(cid, 1).messages == store.visible(cid, at_version=first.for_version).messages
    marked = [s.calls for s in store.replay(cid) if s.calls]
    assert marked == [[1], [2]]  # a usage event is a version of its own
    before = len(store.history(cid))
    with pytest.raises(UnknownMessageError):
        store.record_usage(cid, model="m", prompt_tokens=1, sent=["msg_nope"])
    with pytest.raises(InvalidMessageError):
        store.record_usage(cid, model="m", prompt_tokens=1, sent=[{"role": "wizard"}])
    with pytest.raises(InvalidOperationError, match="call 3"):
        store.call(cid, 3)
    assert len(store.history(cid)) == before


# ---- fork ---------------------------------------------------------------------------------


def test_fork_copies_the_visible_context_at_a_version(store):
    cid, ids = scripted(store)
    fork = store.fork(cid, at_version=5, name="what if", actor="dev")
    then, now = store.visible(cid, at_version=5), store.visible(fork)
    assert now.messages == then.messages and now.token_counts == then.token_counts
    assert now.tokens == then.tokens and now.batch == 0
    listed = {c.context_id: c for c in store.contexts()}
    assert listed[fork].forked_from == {"context_id": str(cid), "version": 5}
    assert listed[fork].name == "what if"
    store.insert(fork, [user("a different path")], actor="dev")
    assert store.visible(cid).version == 8  # the source is untouched
    head_fork = store.fork(cid)
    assert store.visible(head_fork).messages == store.visible(cid).messages
    summary = store.visible(head_fork).summaries
    assert list(summary.values()) == [ids[:3]]
    assert [h.type for h in store.history(fork)] == ["create", "fork", "insert"]
    with pytest.raises(InvalidOperationError, match="no version 42"):
        store.fork(cid, at_version=42)


# ---- export / import ------------------------------------------------------------------------


def test_export_import_round_trip_is_exact(store, tmp_path):
    cid, _ = scripted(store)
    store.record_usage(cid, model="m", prompt_tokens=10)
    lines = list(store.export_events(cid))
    assert [json.loads(x)["version"] for x in lines[:-1]] == list(range(1, 10))
    trailer = json.loads(lines[-1])["trailer"]
    assert trailer["events"] == 9 and trailer["context_id"] == str(cid)
    with ContextStore.from_url(f"sqlite:///{tmp_path / 'other.db'}") as other:
        assert other.import_events(lines) == cid
        assert list(other.export_events(cid)) == lines
        assert other.visible(cid) == store.visible(cid)
        assert other.history(cid) == store.history(cid)
        assert other.verify().ok
        with pytest.raises(ContextExistsError):
            other.import_events(lines)
        copy = other.import_events(lines, new_id=True)
        assert copy != cid and other.visible(copy).messages == store.visible(cid).messages
        assert other.verify(copy).ok


@pytest.mark.parametrize("written_by", ["orjson", "standard encoder"])
def test_a_reformatted_export_with_floats_imports_with_its_chains(store, monkeypatch, written_by):
    """An export whose lines another tool laid out again (spaces after separators) has its
    states encoded again to check the chains, whichever encoder wrote them: ctxstore's
    orjson now, the standard library's before (they spell 1e-05 and 2.5e-07 otherwise)."""
    from ctxstore.adapters.storage.codec.transcoder import ContextTranscoder

    if written_by == "standard encoder":
        monkeypatch.setattr(ContextTranscoder, "encode", ContextTranscoder.encode_standard)
    cid = store.create(metadata={"temperature": 1e-05})
    store.insert(cid, [user("a") | {"metadata": {"p": [2.5e-07, 0.5, 1e22]}}])
    monkeypatch.undo()
    lines = [json.dumps(json.loads(x)) for x in store.export_events(cid)]
    assert all('"state": {' in x for x in lines[:-1])  # laid out otherwise: encoded again
    copy = store.import_events(lines, new_id=True)
    assert store.visible(copy).messages == store.visible(cid).messages
    assert store.verify(copy).ok


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda r: r["state"].update(actor="mallory"), "chain does not match"),
        (lambda r: r.update(version=7), "version"),
        (lambda r: r.update(topic="os:system"), "not a ctxstore event type"),
        (lambda r: r.update(context_id="nope"), "not a UUID"),
        (lambda r: (r["state"].pop("messages"), r.update(chain=None)), "not a valid"),
    ],
)
def test_an_altered_export_is_refused_and_nothing_written(store, edit, needle):
    cid, _ = scripted(store)
    lines = list(store.export_events(cid))
    rec = json.loads(lines[1])
    edit(rec)
    lines[1] = json.dumps(rec)
    before = store.audit(limit=1000).entries
    with pytest.raises(InvalidImportError, match=needle):
        store.import_events(lines, new_id=True)
    assert store.audit(limit=1000).entries == before


def test_a_truncated_export_is_refused_and_nothing_written(store):
    """An export cut short (its tail lost) would import as an older version of the context:
    its trailer is missing or does not match, and nothing is written."""
    cid, _ = scripted(store)
    lines = list(store.export_events(cid))
    before = store.audit(limit=1000).entries
    for cut in (lines[:-1], lines[:-3], [*lines[:-3], lines[-1]], lines[:-1] + [lines[-1][:20]]):
        with pytest.raises(InvalidImportError):
            store.import_events(cut, new_id=True)
    assert store.audit(limit=1000).entries == before
    # an export written before trailers imports when asked to
    copy = store.import_events(lines[:-1], new_id=True, without_trailer=True)
    assert store.visible(copy).messages == store.visible(cid).messages


def test_an_export_whose_result_breaks_the_transcript_is_refused(store):
    cid = store.create()
    store.insert(cid, [call("c1"), tool("c1")])
    lines = list(store.export_events(cid))
    rec = json.loads(lines[1])
    rec["state"]["messages"] = rec["state"]["messages"][1:]  # a tool result without its call
    rec["state"]["tokens"] = rec["state"]["tokens"][1:]
    rec["chain"] = None
    with pytest.raises(MalformedTranscriptError):
        store.import_events([lines[0], json.dumps(rec)], new_id=True, without_trailer=True)


def test_import_an_openai_transcript(store):
    def turn(n):
        return [user(f"weather in 巴黎, day {n}?"), call(f"c{n}"), tool(f"c{n}", "sunny"),
                {"role": "assistant", "content": "Sunny."}, user("thanks")]  # fmt: skip

    messages = [m for n in range(300) for m in turn(n)]
    seen = []
    cid = store.import_transcript(
        "\n".join(json.dumps(m) for m in messages),
        name="t",
        progress=lambda d, t: seen.append((d, t)),
    )
    v = store.visible(cid)
    assert [m.to_openai() for m in v.messages] == messages
    assert seen[-1] == (1500, 1500) and len(seen) == 3
    assert store.import_transcript(json.dumps(messages[:2])) != cid
    before = len(store.contexts())
    with pytest.raises(MalformedTranscriptError, match="transcript messages"):
        store.import_transcript([user("q"), tool("c-none")])
    with pytest.raises(InvalidMessageError):
        store.import_transcript([user("q"), {"role": "wizard", "content": "?"}])
    with pytest.raises(InvalidImportError, match="message 1"):
        store.import_transcript('[{"role": "user", "content": "q"}, 7]')
    assert len(store.contexts()) == before


# ---- tamper evidence ------------------------------------------------------------------------


def _tamper(url, sql_sqlite, sql_pg, params=()):
    if url.startswith("sqlite"):
        with sqlite3.connect(url[len("sqlite:///") :]) as conn:
            conn.execute(sql_sqlite, params)
        return
    parts = urlsplit(url)
    schema = parse_qs(parts.query)["schema"][0]
    with psycopg.connect(
        host=parts.hostname, port=parts.port, user=parts.username, dbname=parts.path.strip("/"),
        autocommit=True,
    ) as conn:  # fmt: skip
        conn.execute(f'SET search_path TO "{schema}"')
        conn.execute(sql_pg, params)


def _delete_events(url, cid, condition):
    """Delete a context's stored events matching a condition on originator_version."""
    _tamper(
        url,
        f"DELETE FROM stored_events WHERE originator_id = ? AND originator_version {condition}",
        f"DELETE FROM ctxstore_events WHERE originator_id = %s AND originator_version {condition}",
        (cid.hex if url.startswith("sqlite") else cid,),
    )


def test_verify_catches_an_altered_row(durable_url):
    with ContextStore.from_url(durable_url, Settings(snapshot_interval=1000)) as store:
        cid, _ = scripted(store)
        other, _ = scripted(store)
        assert store.verify().ok and store.verify(cid).events == 8
    _tamper(
        durable_url,
        "UPDATE stored_events SET state = CAST(replace(CAST(state AS TEXT), 'carol', 'eve') "
        "AS BLOB) WHERE originator_id = ? AND originator_version = 7",
        "UPDATE ctxstore_events SET state = convert_to(replace(convert_from(state, 'UTF8'), "
        "'carol', 'eve'), 'UTF8') WHERE originator_id = %s AND originator_version = 7",
        (cid.hex if durable_url.startswith("sqlite") else cid,),
    )
    with ContextStore.from_url(durable_url) as store:
        assert store.history(cid)[6].actor == "eve"  # the forgery reads back...
        result = store.verify()
        assert not result.ok  # ...but is caught, at its version, in that context only
        assert [(b.context_id, b.version) for b in result.broken] == [(cid, 7)]
        assert store.verify(other).ok and not store.verify(cid).ok


def test_verify_catches_a_deleted_row(durable_url):
    with ContextStore.from_url(durable_url) as store:
        cid, _ = scripted(store)
    _delete_events(durable_url, cid, "= 4")
    with ContextStore.from_url(durable_url) as store:
        broken = store.verify(cid).broken
        assert [(b.version, "missing" in b.reason) for b in broken] == [(4, True)]


def test_verify_reports_a_context_whose_rows_were_all_deleted_behind_its_back(durable_url):
    """Every row of a context deleted behind the store's back (not an erasure: the audit
    index still knows its versions) is a broken chain, in one context's verify and in the
    whole store's; a context erased is simply gone."""
    with ContextStore.from_url(durable_url) as store:
        cid, _ = scripted(store)
        store.audit()  # indexed
        erased = store.create(actor="a")
        store.insert(erased, [user("soon gone")], actor="a")
        store.audit()
        store.erase(erased, reason="asked", actor="a")
    _delete_events(durable_url, cid, ">= 1")
    with ContextStore.from_url(durable_url) as store:
        assert [b.version for b in store.verify(cid).broken] == [1]
        assert [(b.context_id, b.version) for b in store.verify().broken] == [(cid, 1)]
        with pytest.raises(ContextNotFoundError):
            store.verify(erased)


# ---- properties ---------------------------------------------------------------------------


@settings(max_examples=examples(20), deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_replay_diff_and_chain_agree_with_time_travel(
    store, reference_model, draw_operation, apply_operation, data
):
    """Random operations: every replay step equals time travel, diffs compose, chain holds."""
    cid = store.create()
    model, counter = reference_model(), [0]
    for _ in range(data.draw(st.integers(1, 25))):
        op = draw_operation(data, model, counter)
        expected = model.apply(op)
        try:
            apply_operation(store, cid, op)
        except CtxStoreError as exc:
            assert type(exc).__name__ == expected, (op, exc)
        else:
            assert expected is None, (op, expected)
    steps = list(store.replay(cid))
    for s in steps:
        assert s.visible == store.visible(cid, at_version=s.event.version)
    assert [m.id for m in steps[-1].visible.messages] == model.ids()
    head = steps[-1].event.version
    v1 = data.draw(st.integers(1, head))
    d = store.diff(cid, v1, head)
    before = {m.id for m in store.visible(cid, at_version=v1).messages}
    after = {m.id for m in store.visible(cid).messages}
    assert (before - {m.id for m in d.removed}) | {m.id for m in d.added} == after
    assert store.verify(cid).ok
    assert [e.version for e in store.audit(context_id=cid, limit=1000).entries] == list(
        range(1, head + 1)
    )


def test_indexing_a_page_another_process_indexed_first_is_skipped(durable_url, monkeypatch):

    with ContextStore.from_url(durable_url) as a, ContextStore.from_url(durable_url) as b:
        cid = a.create(actor="a")
        a.insert(cid, [user("x")], actor="a")
        reached = a.admin.refresh_audit_index()
        stale = [0]  # b believes nothing is indexed yet, as if a indexed while b was reading
        real = b._storage.audit_index.position
        monkeypatch.setattr(
            b._storage.audit_index, "position", lambda: stale.pop() if stale else real()
        )
        assert b.admin.refresh_audit_index() == reached
        assert [e.version for e in b.audit(limit=1000).entries] == [1, 2]


def test_verify_catches_deleted_newest_events_the_audit_index_has_seen(durable_url):
    with ContextStore.from_url(durable_url) as store:
        cid, _ = scripted(store)
        store.audit()  # the index now knows versions 1..8
    _delete_events(durable_url, cid, ">= 7")
    with ContextStore.from_url(durable_url) as store:
        for result in (store.verify(), store.verify(cid)):
            assert [(b.context_id, b.version) for b in result.broken] == [(cid, 7)]
            assert "7..8" in result.broken[0].reason


@pytest.mark.parametrize("keyed", [False, True])
def test_a_context_erased_while_verify_walks_is_no_broken_chain(durable_url, monkeypatch, keyed):
    """Another process erased a context (destroying its key, deleting its attachment) after
    verify read a page of its events and before it checked them: the whole store still
    verifies, the erased context left out (it reported a broken chain: "stored state
    cannot be read", "attachment ... is missing"). A context made again under the erased
    one's id verifies too; one still damaged is still reported."""
    from eventsourcing.cryptography import AESCipher
    from pydantic import SecretStr

    from ctxstore.adapters.store import audit

    from .test_attachments import B64

    settings = Settings(
        encryption_key=SecretStr(AESCipher.create_key(32)) if keyed else None, actor="a"
    )
    picture = {"role": "user", "content": [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{B64}"}}]}  # fmt: skip
    with ContextStore.from_url(durable_url, settings) as writer:
        kept = writer.create()
        gone = writer.create()
        again = writer.create()
        for n in range(4):
            writer.insert(gone, [picture if n == 0 else user(f"gone {n}")])
            writer.insert(kept, [user(f"kept {n}")])
            writer.insert(again, [user(f"again {n}")])
        with ContextStore.from_url(durable_url, settings) as verifier:
            view = verifier._storage.audit_index
            real = view.event_rows
            pages = []

            def erased_after_the_first_page(*args, **kwargs):
                if len(pages) == 1:  # the first page is read, not yet checked
                    writer.erase(gone, reason="asked")
                    writer.erase(again, reason="asked")
                    writer.create(context_id=again)
                    writer.insert(again, [user("made again")])
                pages.append(real(*args, **kwargs))
                return pages[-1]

            monkeypatch.setattr(audit, "VERIFY_PAGE", 4)
            monkeypatch.setattr(view, "event_rows", erased_after_the_first_page)
            result = verifier.verify()
            assert len(pages) > 2, "the erasure came while verify walked"
            assert result.ok, result.broken
            assert gone.hex not in {b.context_id.hex for b in result.broken}
            monkeypatch.setattr(view, "event_rows", real)
            assert verifier.verify(again).ok and verifier.verify(kept).ok
