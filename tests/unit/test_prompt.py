"""Budgeted prompt building and resource packing (seeds 003 and 004)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxstore.domain.errors import PromptDoesNotFitError
from ctxstore.domain.messages import Message
from ctxstore.domain.packing import Resource, pack, pack_exact, pack_greedy
from ctxstore.domain.prompt import (
    STRATEGIES,
    PromptConfig,
    PromptItem,
    build_prompt,
)
from ctxstore.domain.tokens import ESTIMATE, REPLY_PRIMING, estimate_text_tokens, message_tokens
from ctxstore.domain.transcript import check_transcript

from ..conftest import examples


def item(n, role, text="", **extra):
    message = Message(id=f"m{n}", role=role, content=text or None, **extra)
    return PromptItem(message, message_tokens(message.model_dump(mode="json"), ESTIMATE))


def count(m):
    return message_tokens(m.model_dump(mode="json"), ESTIMATE)


def call(n, call_id):
    return item(
        n, "assistant", tool_calls=[{"id": call_id, "function": {"name": "f", "arguments": "{}"}}]
    )


def result(n, call_id, text="result " * 5):
    return item(n, "tool", text, tool_call_id=call_id)


def conversation(turns=6):
    items = [item(0, "system", "You are a careful assistant.")]
    n = 1
    for t in range(turns):
        items.append(item(n, "user", f"question {t} about topic{t} " * 4))
        items.append(call(n + 1, f"c{t}"))
        items.append(result(n + 2, f"c{t}"))
        items.append(item(n + 3, "assistant", f"answer {t} " * 6))
        n += 4
    return items


def ids(prompt):
    return [m.id for m in prompt.messages]


# ---- seed 004's scenarios ----------------------------------------------------------------


def res(name, text):
    return Resource(name, estimate_text_tokens(text))


def test_seed_004_scenario_1_a_too_large_item_is_skipped_and_packing_goes_on():
    refs = [res("res1", "a" * 100), res("res2", "b" * 2000), res("res3", "c" * 100)]
    for packing in (pack_greedy(refs, 100), pack(refs, 100)):
        assert [r.id for r in packing.kept] == ["res1", "res3"]
        assert [r.resource.id for r in packing.removed] == ["res2"]
        assert "more than the whole limit" in packing.removed[0].reason


def test_seed_004_scenario_3_utilization_and_the_exact_choice_never_worse():
    refs = [
        res("res1", "a" * 200),
        res("res2", "b" * 800),
        res("res3", "c" * 200),
        res("res4", "d" * 200),
    ]
    greedy = pack_greedy(refs, 200)
    assert [r.id for r in greedy.kept] == ["res1", "res3", "res4"]
    assert greedy.used == 150 and greedy.utilization == 0.75
    exact = pack(refs, 200)
    assert exact.method == "exact" and exact.used == 200 and exact.utilization == 1.0
    assert [r.id for r in exact.kept] == ["res2"]


def test_priority_breaks_ties_between_equally_full_choices():
    refs = [Resource("a", 50), Resource("b", 50, priority=5), Resource("c", 50)]
    assert [r.id for r in pack(refs, 100).kept] == ["a", "b"]
    assert [r.id for r in pack(refs, 50).kept] == ["b"]


@settings(max_examples=examples(200), deadline=None)
@given(
    sizes=st.lists(st.tuples(st.integers(0, 120), st.integers(0, 3)), max_size=12),
    limit=st.integers(0, 300),
)
def test_exact_packing_fits_and_never_does_worse_than_greedy(sizes, limit):
    refs = [Resource(f"r{i}", t, p) for i, (t, p) in enumerate(sizes)]
    greedy, exact = pack_greedy(refs, limit), pack_exact(refs, limit)
    assert exact is not None
    assert exact.used <= limit and greedy.used <= limit
    assert exact.used >= greedy.used
    assert exact == pack_exact(refs, limit)  # deterministic
    assert sorted(r.id for r in exact.kept + [x.resource for x in exact.removed]) == sorted(
        r.id for r in refs
    )


# ---- build_prompt ---------------------------------------------------------------------------


def test_everything_is_sent_when_it_fits():
    items = conversation(2)
    p = build_prompt(items, 10_000, count=count)
    assert ids(p) == [i.message.id for i in items] and not p.omitted
    assert p.tokens == sum(i.tokens for i in items) + REPLY_PRIMING and p.limit == 9000


def test_full_drops_oldest_turns_whole_with_a_marker():
    items = conversation(6)
    total = sum(i.tokens for i in items) + REPLY_PRIMING
    p = build_prompt(items, int(total * 0.6), count=count, strategy="full")
    assert p.tokens <= p.limit
    assert ids(p)[0] == "m0" and ids(p)[1] == "ctxstore-marker"
    assert "truncated" in p.messages[1].text()
    kept = ids(p)[2:]
    assert (
        kept[0].startswith("m")
        and items[[i.message.id for i in items].index(kept[0])].message.role == "user"
    )
    assert {o.id for o in p.omitted} == {i.message.id for i in items} - set(ids(p))
    assert all("oldest turn" in o.reason for o in p.omitted)


def test_must_keeps_that_do_not_fit_are_reported():
    items = [item(0, "system", "rules " * 200), item(1, "user", "hi")]
    with pytest.raises(PromptDoesNotFitError, match="alone need .* tokens; the limit is 90"):
        build_prompt(items, 100, count=count)


def test_newest_user_message_and_system_messages_are_always_kept():
    items = conversation(5)
    must = {"m0", "m17"}  # the system message and the newest user message
    for strategy in STRATEGIES:
        p = build_prompt(items, 120, count=count, strategy=strategy)
        assert must <= set(ids(p)), strategy
        assert p.tokens <= p.limit


def test_compressed_keeps_summaries_and_recent_messages():
    items = conversation(4)
    summary = Message(
        id="s1", role="user", content="summary of the first turns", metadata={"ctxstore": "summary"}
    )
    items.insert(1, PromptItem(summary, count(summary), summary=True))
    p = build_prompt(items, 10_000, count=count, strategy="compressed")
    assert "s1" in ids(p)
    assert ids(p)[-5:] == [i.message.id for i in items][-5:]
    assert any("not a summary" in o.reason for o in p.omitted)


def test_adaptive_keeps_important_messages_and_summarizes_topics():
    items = conversation(6)
    items[5] = item(5, "user", "This is an important decision: we use PostgreSQL. " * 2)
    cfg = PromptConfig(strategy="adaptive")
    p = build_prompt(items, 300, count=count, config=cfg)
    assert "m5" in ids(p)
    assert "ctxstore-topics" in ids(p)
    topic = next(m for m in p.messages if m.id == "ctxstore-topics")
    assert topic.text().startswith("[Session summary]")
    assert p.tokens <= p.limit


def test_semantic_keeps_what_is_relevant_to_the_query():
    items = conversation(6)
    items[5] = item(5, "user", "the database migration failed with a lock timeout")
    p = build_prompt(
        items, 400, count=count, strategy="semantic", query="why did the database migration fail?"
    )
    assert "m5" in ids(p)
    omitted = {o.id: o.reason for o in p.omitted}
    assert any("below" in r for r in omitted.values())
    chinese = [
        item(0, "system", "s"),
        item(1, "user", "数据库迁移失败了"),
        item(2, "assistant", "好的"),
        item(3, "user", "今天天气很好"),
        item(4, "assistant", "是的"),
        item(5, "user", "再看看数据库迁移"),
    ]
    p2 = build_prompt(
        chinese,
        1000,
        count=count,
        strategy="semantic",
        config=PromptConfig(semantic={"recent": 1, "threshold": 0.1}),
    )
    assert "m1" in ids(p2) and "m3" not in ids(p2)


def test_bad_arguments_are_named():
    from ctxstore.domain.errors import InvalidOperationError

    with pytest.raises(InvalidOperationError, match="unknown strategy 'best'"):
        build_prompt(conversation(1), 1000, count=count, strategy="best")
    with pytest.raises(InvalidOperationError, match="budget"):
        build_prompt(conversation(1), 0, count=count)


@st.composite
def transcripts(draw):
    items = [item(0, "system", "sys")] if draw(st.booleans()) else []
    n = len(items)
    for _ in range(draw(st.integers(1, 25))):
        kind = draw(st.sampled_from(["user", "assistant", "calls"]))
        words = " ".join(
            draw(st.sampled_from(["alpha", "beta", "数据", "error", "plan"]))
            for _ in range(draw(st.integers(1, 30)))
        )
        if kind == "calls":
            calls = [f"c{n}_{k}" for k in range(draw(st.integers(1, 3)))]
            items.append(
                item(
                    n,
                    "assistant",
                    tool_calls=[
                        {"id": c, "function": {"name": "f", "arguments": words}} for c in calls
                    ],
                )
            )
            n += 1
            for c in calls:
                items.append(result(n, c, words))
                n += 1
        else:
            items.append(item(n, kind, words))
            n += 1
    return items


@settings(max_examples=examples(300), deadline=None)
@given(items=transcripts(), budget=st.integers(1, 3000), strategy=st.sampled_from(STRATEGIES))
def test_any_context_and_budget_fits_keeps_pairs_and_is_deterministic(items, budget, strategy):
    try:
        p = build_prompt(items, budget, count=count, strategy=strategy)
    except PromptDoesNotFitError:
        must = sum(i.tokens for i in items if i.message.role in ("system", "developer"))
        users = [i for i in items if i.message.role == "user"]
        must += users[-1].tokens if users else 0
        assert must + REPLY_PRIMING > int(budget * 0.9)
        return
    assert p.tokens <= p.limit == int(budget * 0.9)
    assert (
        p.tokens
        == sum(
            count(m) if m.id in p.added else next(i.tokens for i in items if i.message.id == m.id)
            for m in p.messages
        )
        + REPLY_PRIMING
    )
    sent = [(m.id, m.model_dump(mode="json")) for m in p.messages]
    check_transcript(sent)  # no tool call separated from its result
    original = [i.message.id for i in items]
    kept = [m.id for m in p.messages if m.id not in p.added]
    assert kept == [i for i in original if i in set(kept)]  # original order
    assert set(kept) | {o.id for o in p.omitted} == set(original)
    users = [i.message.id for i in items if i.message.role == "user"]
    must = {i.message.id for i in items if i.message.role in ("system", "developer")}
    assert must | set(users[-1:]) <= set(kept)
    assert p == build_prompt(items, budget, count=count, strategy=strategy)  # deterministic


@st.composite
def summarized(draw):
    """A transcript with summaries (as compress writes them: the system role) among its
    turns, of any size."""
    items = draw(transcripts())
    for k in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(items)))
        text = "summary " * draw(st.integers(1, 200))
        message = Message(id=f"s{k}", role="system", content=text,
                          metadata={"ctxstore": {"summary": True}})  # fmt: skip
        if at == len(items) or items[at].message.role != "tool":  # (never inside a call)
            items.insert(at, PromptItem(message, count(message), summary=True))
    return items


@settings(max_examples=examples(300), deadline=None)
@given(items=summarized(), budget=st.integers(1, 3000))
def test_full_drops_a_summary_only_after_every_turn_after_it(items, budget):
    try:
        p = build_prompt(items, budget, count=count, strategy="full")
    except PromptDoesNotFitError:
        return
    kept = {m.id for m in p.messages}
    must = _must(items)
    for n, i in enumerate(items):
        if i.summary and i.message.id not in kept:
            later = [j.message.id for j in items[n + 1 :] if not j.summary]
            assert not [m for m in later if m in kept and m not in must], (i.message.id, kept)


@settings(max_examples=examples(300), deadline=None)
@given(items=summarized(), budget=st.integers(1, 3000))
def test_compressed_drops_a_summary_only_when_it_cannot_fit_beside_what_it_keeps_first(
    items, budget
):
    try:
        p = build_prompt(items, budget, count=count, strategy="compressed")
    except PromptDoesNotFitError:
        return
    kept = {m.id for m in p.messages}
    must = _must(items)
    before = sum(i.tokens for i in items if i.message.id in must) + REPLY_PRIMING
    for i in reversed(items):  # newest first, as they are taken
        if not i.summary:
            continue
        if i.message.id in kept:
            before += i.tokens
        else:
            assert before + i.tokens > p.limit, i.message.id  # it could not fit


def _must(items):
    users = [i.message.id for i in items if i.message.role == "user" and not i.summary]
    system = {i.message.id for i in items if i.message.role in ("system", "developer")
              and not i.summary}  # fmt: skip
    return system | set(users[-1:])
