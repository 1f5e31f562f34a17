"""The integrations' per-instance caches are bounded (a long-lived saver or session store
serving many threads must not grow without end)."""

from ctxstore.adapters.integrations.surface import LRU


def test_the_least_recently_set_keys_go_past_the_bound():
    cache: LRU[int, str] = LRU(3)
    for n in range(10):
        cache[n] = str(n)
    assert list(cache) == [7, 8, 9]
    cache[8] = "again"  # set again: the most recent now
    cache[10] = "10"
    assert list(cache) == [9, 8, 10]


def test_the_integrations_caches_are_bounded():
    import pytest

    pytest.importorskip("langgraph")
    from ctxstore import ContextStore
    from ctxstore.adapters.integrations.langgraph_saver import CtxStoreSaver
    from ctxstore.adapters.integrations.langgraph_threads import THREADS

    with ContextStore.from_url("memory://") as store:
        saver = CtxStoreSaver(store)
        threads = saver.threads._threads
        assert isinstance(threads, LRU) and threads.most == THREADS
