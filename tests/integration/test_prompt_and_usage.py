"""build_prompt and provider usage through the store, on every backend."""

import pytest

from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.domain.errors import InvalidOperationError, PromptDoesNotFitError
from ctxstore.domain.prompt import PromptConfig


def fill(store, cid, turns):
    for t in range(turns):
        store.insert(cid, [
            {"role": "user", "content": f"question {t}: how do I configure the cache? " * 3},
            {"role": "assistant", "tool_calls": [{"id": f"c{t}", "function": {"name": "search", "arguments": '{"q": "cache"}'}}]},
            {"role": "tool", "tool_call_id": f"c{t}", "content": "docs about caching " * 10},
            {"role": "assistant", "content": f"answer {t}: set the size " * 5},
        ])  # fmt: skip


def test_build_prompt_through_the_store(store):
    cid = store.create()
    store.insert(cid, {"role": "system", "content": "You are helpful."})
    fill(store, cid, 8)
    head = store.visible(cid)
    everything = store.build_prompt(cid, 100_000)
    assert everything.tokens == head.tokens and not everything.omitted
    tight = store.build_prompt(cid, head.tokens // 2, "full")
    assert tight.tokens <= tight.limit == int(head.tokens // 2 * 0.9)
    assert tight.messages[0].role == "system" and tight.messages[1].id == "ctxstore-marker"
    assert tight.messages[-1].id == head.messages[-1].id
    with pytest.raises(PromptDoesNotFitError):
        store.build_prompt(cid, 20)
    old = store.build_prompt(cid, 100_000, at_version=3)
    assert len(old.messages) == 5
    packed = store.build_prompt(
        cid,
        head.tokens + 200,
        resources=[{"id": "big", "tokens": 10_000}, {"id": "doc", "text": "a small attached file"}],
    )
    assert packed.resources == ["doc"] and packed.omitted_resources[0].id == "big"
    assert packed.tokens <= packed.limit
    with pytest.raises(InvalidOperationError, match="needs 'tokens'"):
        store.build_prompt(cid, 1000, resources=[{"id": "x"}])
    with pytest.raises(InvalidOperationError, match="safety"):
        store.build_prompt(cid, 1000, safety=1.5)


def test_strategy_comes_from_settings(tmp_path):
    cfg = Settings(prompt=PromptConfig(strategy="compressed", compressed={"recent_messages": 2}))
    with ContextStore.from_url("memory://", cfg) as store:
        cid = store.create()
        fill(store, cid, 3)
        p = store.build_prompt(cid, 100_000)
        assert p.strategy == "compressed" and len(p.messages) == 1 + 3  # newest user + last 2 units


def test_usage_is_recorded_shown_and_compared_per_model(store):
    cid = store.create()
    fill(store, cid, 2)
    sent = store.visible(cid)
    store.record_usage(
        cid, model="gpt-4o", prompt_tokens=int(sent.tokens * 1.2), completion_tokens=40
    )
    p = store.build_prompt(cid, 200, "full")
    store.record_usage(
        cid, model="gpt-4o", prompt_tokens=p.tokens, version=sent.version, counted_tokens=p.tokens
    )
    store.record_usage(cid, model="other", prompt_tokens=sent.tokens, version=2)
    usage = store.history(cid, types=["usage"])
    assert [u.details["model"] for u in usage] == ["gpt-4o", "gpt-4o", "other"]
    assert (
        usage[0].details["counted_tokens"] == sent.tokens
        and usage[0].details["for_version"] == sent.version
    )
    assert store.visible(cid).messages == sent.messages  # usage does not change the context
    report = {r.model: r for r in store.usage_report(context_id=cid)}
    gpt = report["gpt-4o"]
    assert gpt.calls == 2 and gpt.completion_tokens == 40
    assert gpt.prompt_tokens == int(sent.tokens * 1.2) + p.tokens
    assert gpt.counted_tokens == sent.tokens + p.tokens
    assert gpt.mean_error == pytest.approx(
        ((sent.tokens - int(sent.tokens * 1.2)) / int(sent.tokens * 1.2)) / 2
    )
    assert {r.model for r in store.usage_report()} >= {"gpt-4o", "other"}
    assert [r.model for r in store.usage_report(model="other")] == ["other"]
    with pytest.raises(InvalidOperationError, match="no version 999"):
        store.record_usage(cid, model="m", prompt_tokens=1, version=999)
    with pytest.raises(InvalidOperationError, match="prompt_tokens"):
        store.record_usage(cid, model="m", prompt_tokens=-1)


def chat_completion(text, prompt_tokens, completion_tokens, model="gpt-4o-2024-08-06"):
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": model,
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}]}  # fmt: skip


def test_a_call_shows_its_response_and_the_prompt_diff_across_a_compaction(store):
    cid = store.create()
    fill(store, cid, 3)
    first = store.record_response(cid, chat_completion("first reply", 300, 12))
    covered = [m.id for m in store.visible(cid).messages[:4]]
    store.compress(cid, covered, {"role": "user", "content": "Summary of turn 0."})
    # The last answer call 1 sent, edited (its own reply came after it: call 2 adds it).
    store.replace(cid, -2, {"role": "assistant", "content": "answer 2, edited"})
    store.insert(cid, {"role": "user", "content": "one more question"})
    store.record_response(cid, chat_completion("second reply", 200, 9))
    one, two = store.call(cid, 1), store.call(cid, 2)
    assert [m.text() for m in one.response or []] == ["first reply"]
    assert one.response and one.response[0].id == first.ids[0]
    assert [m.text() for m in two.response or []] == ["second reply"]
    assert store.call(cid, -1) == two
    diff = store.call_diff(cid, 2)
    assert diff.previous == 1 and diff.number == 2
    # Both calls sent the whole visible context: known by id, the diff is exact.
    assert [m.id for m in diff.removed] == covered
    assert [m.preview for m in diff.added] == [
        "Summary of turn 0.", "first reply", "one more question",
    ]  # fmt: skip
    assert [m.preview for m in diff.changed] == ["answer 2, edited"]
    assert diff.unchanged == len(one.messages or []) - len(covered) - 1
    assert (diff.tokens_before, diff.tokens_after) == (one.counted_tokens, two.counted_tokens)
    opening = store.call_diff(cid, 1)
    assert opening.previous is None and len(opening.added) == len(one.messages or [])
    assert opening.tokens_before == 0 and not opening.removed
    assert all(c.cost is None for c in store.calls(cid))  # no price table
    with pytest.raises(InvalidOperationError, match="not a call 3"):
        store.call_diff(cid, 3)


def test_calls_are_priced_by_the_table_longest_name_first(tmp_path):
    prices = {"gpt-4o": {"input": 2.5, "output": 10}, "gpt-4o-mini": {"input": 0.15, "output": 0.6}}
    with ContextStore.from_url("memory://", Settings(prices=prices)) as store:
        cid = store.create()
        store.insert(cid, {"role": "user", "content": "hi"})
        store.record_response(cid, chat_completion("a", 1000, 100))
        store.record_response(cid, chat_completion("b", 1000, 100, "gpt-4o-mini-2024-07-18"))
        store.record_response(cid, chat_completion("c", 1000, 100, "o3"))
        costs = [c.cost for c in store.calls(cid)]
        assert costs == [pytest.approx(0.0035), pytest.approx(0.00021), None]
        assert store.call(cid, 2).cost == pytest.approx(0.00021)


def test_a_calls_latency_is_recorded_where_measured_and_checked(store):
    cid = store.create()
    store.insert(cid, {"role": "user", "content": "hi"})
    store.record_response(cid, chat_completion("a", 10, 2), latency=0.8125)
    store.record_usage(cid, model="gpt-4o", prompt_tokens=12, latency=2)
    store.record_usage(cid, model="gpt-4o", prompt_tokens=12)
    assert [c.latency_ms for c in store.calls(cid)] == [812.5, 2000.0, None]
    assert store.history(cid, types=["usage"])[0].details["latency_ms"] == 812.5
    version = store.visible(cid).version
    for bad in (-1, float("nan"), float("inf"), True, "1", 8 * 24 * 3600):
        with pytest.raises(InvalidOperationError, match="latency"):
            store.record_usage(cid, model="gpt-4o", prompt_tokens=1, latency=bad)
    assert store.visible(cid).version == version  # nothing written
