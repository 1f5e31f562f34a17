"""expand(): a past summary gives its messages back in its place, later turns stay; one
event; refused, typed, when the result would not be well formed. On every backend, through
snapshots, forks, replaced and nested summaries, the HTTP client and the CLI."""

import pytest

from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.domain.errors import InvalidOperationError, MalformedTranscriptError


def turn(n: int) -> list[dict]:
    return [
        {"role": "user", "content": f"question {n}"},
        {"role": "assistant", "tool_calls": [{"id": f"c{n}", "type": "function",
         "function": {"name": "look", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": f"c{n}", "content": f"found {n}"},
        {"role": "assistant", "content": f"answer {n}"},
    ]  # fmt: skip


def contents(store, cid):
    return [m.content for m in store.visible(cid).messages]


def test_expand_puts_the_messages_back_and_keeps_later_turns(store):
    cid = store.create()
    for n in range(3):
        store.insert(cid, turn(n))
    full = store.visible(cid)
    summary = store.compress(cid, full.ids[:8], "questions 0 and 1").ids[0]
    compressed = store.visible(cid).tokens
    store.insert(cid, turn(3))
    added = store.visible(cid).tokens - compressed
    later = contents(store, cid)[-4:]
    events = len(store.history(cid))
    w = store.expand(cid, summary)
    after = store.visible(cid)
    assert after.ids[:12] == full.ids and contents(store, cid)[-4:] == later
    assert after.tokens == full.tokens + added
    history = store.history(cid)
    assert len(history) == events + 1 and history[-1].type == "expand"
    assert history[-1].message_ids == full.ids[:8] and w.ids == full.ids[:8]
    assert summary not in after.summaries


def test_nested_replaced_and_forked_summaries_expand_from_the_history(store):
    cid = store.create()
    for n in range(4):
        store.insert(cid, turn(n))
    ids = store.visible(cid).ids
    inner = store.compress(cid, ids[:4], "q0").ids[0]
    outer = store.compress(cid, [inner, *ids[4:8]], "q0 and q1").ids[0]
    store.replace(cid, outer, "q0 and q1, edited")
    fork = store.fork(cid)
    store.expand(fork, outer)
    assert store.visible(fork).ids[:5] == [inner, *ids[4:8]]
    store.expand(fork, inner)
    assert store.visible(fork).ids == ids
    assert store.visible(cid).ids[0] == outer  # the source is untouched


def test_expand_after_snapshots_reads_the_restored_messages(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    with ContextStore.from_url(url, Settings(snapshot_interval=2)) as store:
        cid = store.create()
        for n in range(4):
            store.insert(cid, turn(n))
        before = contents(store, cid)
        summary = store.compress(cid, store.visible(cid).ids[:8], "s").ids[0]
        for n in range(4, 7):
            store.insert(cid, turn(n))
        store.expand(cid, summary)
        for n in range(7, 9):  # snapshots taken after the expansion
            store.insert(cid, turn(n))
        expected = contents(store, cid)
    with ContextStore.from_url(url) as store:
        assert contents(store, cid) == expected and expected[:16] == before


def test_expand_refuses_what_is_not_a_summary_or_cannot_come_back(store):
    cid = store.create()
    for n in range(2):
        store.insert(cid, turn(n))
    ids = store.visible(cid).ids
    with pytest.raises(InvalidOperationError, match="not a summary"):
        store.expand(cid, ids[0])
    summary = store.compress(cid, ids[:4], "q0").ids[0]
    store.insert(cid, {"id": ids[0], "role": "user", "content": "the same id again"})
    version = store.visible(cid).version
    with pytest.raises(InvalidOperationError, match="visible again"):
        store.expand(cid, summary)
    assert store.visible(cid).version == version  # nothing written


def test_expand_refuses_a_transcript_it_would_break(store):
    """The summary, edited into a tool call and answered, would give its place back to a
    message that makes no call: the answer would answer nothing. Refused; nothing written."""
    cid = store.create()
    store.insert(cid, [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}])
    summary = store.compress(cid, [store.visible(cid).ids[1]], "a").ids[0]
    calls = [{"id": "c9", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    store.replace(cid, summary, {"role": "assistant", "tool_calls": calls})
    store.insert(cid, {"role": "tool", "tool_call_id": "c9", "content": "r"})
    version = store.visible(cid).version
    with pytest.raises(MalformedTranscriptError, match="well-formed"):
        store.expand(cid, summary)
    assert store.visible(cid).version == version


def test_a_rollback_still_undoes_a_compaction_and_an_expansion_inside_its_batch(store):
    cid = store.create()
    for n in range(3):
        store.insert(cid, turn(n))
    summary = store.compress(cid, store.visible(cid).ids[:4], "q0").ids[0]
    before = store.visible(cid).messages
    store.batch_start(cid)
    store.expand(cid, summary)
    store.batch_end(cid)
    assert store.visible(cid).messages == before
