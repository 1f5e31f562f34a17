"""The Context aggregate's semantics, without storage."""

from typing import Any

import pytest

from ctxstore.domain.context import Context
from ctxstore.domain.errors import (
    InvalidMessageError,
    InvalidOperationError,
    MalformedTranscriptError,
    UnknownBatchError,
    UnknownMessageError,
)
from ctxstore.projections.changes import preview
from ctxstore.projections.history import fold_history
from ctxstore.projections.visible import replay, visible_of


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def call(*ids: str) -> dict[str, Any]:
    return {"role": "assistant", "tool_calls": [{"id": i, "function": {"name": "f"}} for i in ids]}


def result(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": f"result of {call_id}"}


def texts(ctx: Context) -> list[str]:
    return [m.text() or ",".join(m.call_ids) for m in ctx.visible_messages()]


@pytest.fixture
def ctx() -> Context:
    c = Context.start(name="t", metadata={}, actor="a")
    c.insert([user("u1"), call("c1", "c2"), result("c1"), result("c2"), user("u2")], actor="a")
    return c


def test_insert_appends_and_after_places_and_ids_are_stable(ctx):
    ids = [m.id for m in ctx.visible_messages()]
    new = ctx.insert([user("x"), user("y")], after=ids[0], actor="a")
    assert texts(ctx)[:3] == ["u1", "x", "y"]
    assert [m.id for m in ctx.visible_messages()][1:3] == new
    ctx.insert([user("last")], after=-1, actor="a")
    assert texts(ctx)[-1] == "last"


def test_caller_chosen_ids_are_kept_and_must_be_unique(ctx):
    assert ctx.insert([{**user("x"), "id": "mine"}], actor="a") == ["mine"]
    with pytest.raises(InvalidOperationError, match="'mine' is already in use"):
        ctx.insert([{**user("y"), "id": "mine"}], actor="a")


def test_delete_hides_and_replace_keeps_the_id(ctx):
    first = ctx.order[0]
    ctx.replace(first, user("u1 fixed"), actor="a")
    assert ctx.order[0] == first and texts(ctx)[0] == "u1 fixed"
    ctx.delete([-1], actor="a")
    assert texts(ctx) == ["u1 fixed", "c1,c2", "result of c1", "result of c2"]


def test_tool_results_cannot_be_separated_from_their_call(ctx):
    before = (ctx.version, list(ctx.order))
    a, t1 = ctx.order[1], ctx.order[2]
    with pytest.raises(MalformedTranscriptError, match="tool call"):
        ctx.delete([t1], actor="a")
    with pytest.raises(MalformedTranscriptError, match="tool call"):
        ctx.delete([a], actor="a")
    with pytest.raises(MalformedTranscriptError, match="separate"):
        ctx.insert([user("between")], after=a, actor="a")
    with pytest.raises(MalformedTranscriptError, match="did not make"):
        ctx.insert([result("c9")], after=ctx.order[3], actor="a")
    with pytest.raises(MalformedTranscriptError, match="does not follow"):
        ctx.insert([result("c1")], actor="a")
    with pytest.raises(MalformedTranscriptError, match="does not follow"):
        ctx.replace(0, result("c1"), actor="a")
    with pytest.raises(MalformedTranscriptError, match="separate"):
        ctx.replace(a, call("c1", "c2", "c3"), actor="a")  # c3 would have no result
    with pytest.raises(MalformedTranscriptError, match="split"):
        ctx.compress(ctx.order[0:3], user("s"), actor="a")
    assert (ctx.version, ctx.order) == before  # nothing was recorded
    ctx.delete(ctx.order[1:4], actor="a")  # the whole block goes together
    assert texts(ctx) == ["u1", "u2"]


def test_pending_tool_calls_are_allowed_only_at_the_tail():
    c = Context.start(name=None, metadata={}, actor="a")
    c.insert([user("q"), call("c1")], actor="a")
    with pytest.raises(MalformedTranscriptError):
        c.insert([user("too soon")], actor="a")
    c.insert([result("c1"), user("ok now")], actor="a")
    with pytest.raises(MalformedTranscriptError, match="second time"):
        c.insert([call("c2"), result("c2"), result("c2")], actor="a")


def test_records_go_anywhere_and_a_batch_of_them_alone_reads_no_tail(monkeypatch):
    """A record separates nothing: records go between a call and its result and before
    anything. A batch of records alone is placed without reading the context's tail, which
    may be every record the context holds: inserting them costs what they are, not what the
    context holds. A message after them is still judged on the whole transcript."""
    from ctxstore.domain import transcript
    from ctxstore.domain.plain import RECORD_MARK

    def record(n: int) -> dict[str, Any]:
        return {"role": "developer", "content": "", "metadata": {**RECORD_MARK, "n": n}}

    c = Context.start(name=None, metadata={}, actor="a")
    c.insert([record(0), record(1)], actor="a")
    c.insert([user("q"), call("c1")], actor="a")
    read = []
    original = transcript.tail_scanner
    monkeypatch.setattr(transcript, "tail_scanner", lambda *a: read.append(1) or original(*a))
    for n in range(2, 6):
        c.insert([record(n)], actor="a")  # between the call and its result
    c.insert(record(6), after=c.order[0], actor="a")
    assert read == []
    with pytest.raises(MalformedTranscriptError):
        c.insert([user("too soon")], actor="a")  # the call still waits for its result
    c.insert([result("c1"), user("ok")], actor="a")
    assert read == [1, 1]
    assert [t for t in texts(c) if t][-3:] == ["c1", "result of c1", "ok"]  # (records: "")


def test_compress_takes_a_contiguous_run_and_records_what_it_covers(ctx):
    with pytest.raises(InvalidOperationError, match="contiguous"):
        ctx.compress([0, 4], user("s"), actor="a")
    covered = ctx.order[0:4]
    sid = ctx.compress(
        [3, 0, 1, 2], {"role": "user", "content": "summary"}, stats={"k": 1}, actor="a"
    )
    assert ctx.order[0] == sid and texts(ctx) == ["summary", "u2"]
    assert ctx.entries[sid]["summary_of"] == covered
    with pytest.raises(InvalidOperationError, match="tool"):
        ctx.compress([0], result("c1"), actor="a")


def test_unknown_refs_and_bad_arguments_are_named(ctx):
    with pytest.raises(UnknownMessageError, match="'nope'"):
        ctx.delete(["nope"], actor="a")
    with pytest.raises(UnknownMessageError, match="position 9"):
        ctx.delete([9], actor="a")
    with pytest.raises(InvalidOperationError, match="more than once"):
        ctx.delete([0, 0], actor="a")
    with pytest.raises(InvalidOperationError, match="non-empty"):
        ctx.delete([], actor="a")
    with pytest.raises(InvalidOperationError, match="non-empty"):
        ctx.insert([], actor="a")
    with pytest.raises(InvalidMessageError, match="role"):
        ctx.insert([{"role": "robot", "content": "x"}], actor="a")


def test_batches_nest_reuse_numbers_and_roll_back_exactly(ctx):
    base = texts(ctx)
    assert ctx.batch_start(actor="a") == 1
    ctx.insert([user("temp")], actor="a")
    ctx.replace(0, user("changed"), actor="a")
    at_1 = texts(ctx)
    assert ctx.batch_start(actor="a") == 2
    ctx.delete([-1], actor="a")
    ctx.compress([0], user("sum"), actor="a")
    assert ctx.batch_end(to=1, actor="a") == 1  # back to when batch 2 opened
    assert texts(ctx) == at_1
    assert ctx.batch_end(to=0, actor="a") == 0  # back to when batch 1 opened
    assert texts(ctx) == base
    assert ctx.batch_start(actor="a") == 1  # seed 002: 0-1-0-1, numbers reused
    ctx.insert([user("kept")], actor="a")
    assert ctx.batch_end(keep=True, actor="a") == 0
    assert texts(ctx) == [*base, "kept"]


def test_batch_end_refuses_unknown_batches(ctx):
    with pytest.raises(UnknownBatchError, match="no batch is open"):
        ctx.batch_end(actor="a")
    ctx.batch_start(actor="a")
    for bad in (1, 2, -1):
        with pytest.raises(UnknownBatchError, match=str(bad)):
            ctx.batch_end(to=bad, actor="a")


def test_replay_equals_incremental_and_history_marks_reverted(ctx):
    ctx.batch_start(actor="b")
    ctx.insert([user("temp")], actor="b")
    ctx.batch_end(to=0, actor="b")
    ctx.insert([user("after")], actor="c")
    events = list(ctx.collect_events())
    again = replay(events)
    assert visible_of(again) == visible_of(ctx)
    hist = fold_history(events)
    assert [(h.type, h.reverted) for h in hist] == [
        ("create", False),
        ("insert", False),
        ("batch_start", True),
        ("insert", True),
        ("batch_end", False),
        ("insert", False),
    ]
    assert hist[3].reverted_by == 5 and hist[3].actor == "b" and hist[3].batch == 1


def test_rollback_after_kept_inner_batch_reverts_inner_changes_too():
    c = Context.start(name=None, metadata={}, actor="a")
    c.insert([user("base")], actor="a")
    c.batch_start(actor="a")
    c.batch_start(actor="a")
    c.insert([user("inner")], actor="a")
    c.batch_end(keep=True, actor="a")  # batch 2 closes into batch 1
    assert texts(c) == ["base", "inner"]
    c.batch_end(to=0, actor="a")
    assert texts(c) == ["base"]
    hist = fold_history(c.collect_events())
    assert [h.reverted for h in hist] == [False, False, True, True, True, True, False]


def test_single_messages_and_refs_need_no_list(ctx):
    (new,) = ctx.insert(user("alone"), actor="a")
    assert ctx.order[-1] == new
    assert ctx.delete(new, actor="a") == [new]
    tool_id = ctx.order[2]
    ctx.replace(tool_id, "new result text", actor="a")  # a string changes only the content
    replaced = ctx.visible_messages()[2]
    assert (replaced.role, replaced.tool_call_id, replaced.text()) == (
        "tool",
        "c1",
        "new result text",
    )
    with pytest.raises(InvalidOperationError, match="non-empty list"):
        ctx.insert("just a string", actor="a")


def test_a_custom_tool_call_pairs_with_its_result_as_a_function_call_does():
    c = Context.start(name="t", metadata={}, actor="a")
    custom = {
        "role": "assistant",
        "tool_calls": [{"id": "k1", "type": "custom", "custom": {"name": "sh", "input": "ls"}}],
    }
    c.insert([user("list"), custom], actor="a")
    with pytest.raises(MalformedTranscriptError, match="separate"):
        c.insert([user("between")], actor="a")  # the call's result must come first
    c.insert([result("k1"), user("thanks")], actor="a")
    with pytest.raises(MalformedTranscriptError, match="tool call"):
        c.delete([c.order[2]], actor="a")  # the result alone
    c.delete([c.order[1], c.order[2]], actor="a")  # the call with its result
    assert texts(c) == ["list", "thanks"]


def test_change_previews_name_function_and_custom_calls():
    calls = {
        "role": "assistant",
        "content": "checking",
        "tool_calls": [
            {"id": "f1", "type": "function", "function": {"name": "ls", "arguments": "{}"}},
            {"id": "k1", "type": "custom", "custom": {"name": "sh", "input": "pwd"}},
        ],
    }
    assert preview(calls) == "checking [calls ls, sh]"
