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
