"""Integers past a database's bigint are refused with typed errors on every surface
(they used to raise OverflowError on SQLite and answer 500 over HTTP)."""

import pytest

from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.domain.errors import CtxStoreError

HUGE = [2**63, 2**64 + 5, -(2**63) - 1]


@pytest.mark.parametrize("n", HUGE)
def test_huge_numbers_are_typed_errors_in_process(store_url, n):
    with ContextStore.from_url(store_url, Settings(actor="t")) as store:
        cid = store.create()
        store.insert(cid, [{"role": "user", "content": "hi"}])
        calls = [
            lambda: store.visible(cid, at_version=n),
            lambda: store.history(cid, from_version=n),
            lambda: store.audit(after=n),
            lambda: store.audit(context_id=cid, to_version=n),
            lambda: store.diff(cid, 1, n),
            lambda: list(store.replay(cid, to_version=n)),
            lambda: store.call(cid, n),
            lambda: store.fork(cid, at_version=n),
            lambda: store.record_usage(cid, model="m", prompt_tokens=1, version=n),
            lambda: store.record_usage(cid, model="m", prompt_tokens=n),
            lambda: store.insert(cid, [{"role": "user", "content": "x"}], expected_version=n),
            lambda: store.batch_end(cid, to=n),
            lambda: store.delete(cid, [n]),
            lambda: store.build_prompt(cid, n),
            lambda: store.build_prompt(cid, 100, at_version=n),
        ]
        for call in calls:
            with pytest.raises(CtxStoreError):
                call()
        assert store.visible(cid).version == 2
