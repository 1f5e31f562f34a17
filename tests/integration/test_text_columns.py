"""Texts that reach a text column are refused at the boundary, typed and naming the field:
NUL (PostgreSQL refuses it), lone surrogates, overlong names; and a store that already holds
such a value (written before the rule) stays readable: audit and erasure work."""

import pytest

from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.domain.errors import InvalidOperationError

BAD = ["a\x00b", "x\udcffy", "a" * 201]


def user(text):
    return {"role": "user", "content": text}


@pytest.mark.parametrize("bad", BAD)
def test_bad_texts_are_refused_everywhere_and_write_nothing(durable_url, bad):
    with ContextStore.from_url(durable_url, Settings(actor="t")) as store:
        cid = store.create()
        refusals = {
            "actor": lambda: store.insert(cid, [user("x")], actor=bad),
            "tenant": lambda: store.create(tenant=bad),
            "model": lambda: store.record_usage(cid, model=bad, prompt_tokens=1),
            "reason": lambda: store.erase(cid, reason=bad),
            "actor filter": lambda: store.audit(actor=bad),
            "tenant filter": lambda: store.audit(tenant=bad),
        }
        if "\x00" in bad or "\udcff" in bad:
            refusals["name"] = lambda: store.create(name=bad)
        for field, call in refusals.items():
            if field == "reason" and len(bad) > 200:
                continue  # a reason may be long
            with pytest.raises(InvalidOperationError):
                call()
        assert store.visible(cid).version == 1 and len(store.contexts()) == 1
        assert [e.type for e in store.audit().entries] == ["create"]


def test_a_store_already_holding_a_nul_actor_stays_readable(durable_url):
    with ContextStore.from_url(durable_url, Settings(actor="t")) as store:
        cid = store.create(tenant="acme")
        ctx = store._storage.get(cid)  # written as a release without the rule would have
        ctx.insert([user("hi")], actor="a\x00b")
        store._writer.store_pending(ctx)
        entries = store.audit().entries
        assert [e.actor for e in entries] == ["t", "a\ufffdb"]
        assert store.history(cid)[-1].actor == "a\x00b"  # the event keeps what it holds
        other = store.create()
        record = store.erase(cid, reason="clean up")
        assert record.events == 2
    with ContextStore.from_url(durable_url) as again:  # another process: audit still reads
        assert [e.context_id for e in again.audit().entries] == [other]
