"""The facade composes the library's machinery: no write path around the writer, and one
bounded cache per store whose eviction drops everything held for a context."""

from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.cache import ContextCache
from ctxstore.adapters.store.facade import ContextStore

LIBRARY_WRITE_API = ("save", "repository", "recorder", "events", "snapshots", "mapper",
                     "notification_log", "factory", "take_snapshot")  # fmt: skip


def user(text):
    return {"role": "user", "content": text}


def test_the_library_write_api_is_not_reachable_from_the_facade(store):
    for name in LIBRARY_WRITE_API:
        assert not hasattr(store, name), name
        assert not hasattr(store._storage, "save"), "storage has no save() either"
    cid = store.create(actor="a")
    store.insert(cid, [user("x")], actor="a")
    # What a newcomer would try (load, mutate, save) has no door: the one path chains.
    assert store.verify(cid).ok


def test_bulk_pending_events_are_stored_with_their_chain_links(store):
    cid = store.create(actor="a")
    ctx = store._storage.get(cid)
    counter = store.tokenizers.counter(ctx.encoding)
    for i in range(12):
        ctx.insert([user(f"m{i}")], actor="a", counter=counter)
    store._writer.store_pending(ctx)
    assert store.verify(cid).ok and store.visible(cid).version == 13


def test_the_cache_holds_at_most_its_size_and_evicts_locks_with_contexts(store_url):
    with ContextStore.from_url(store_url, Settings(cache_size=4, actor="t")) as store:
        ids = [store.create() for _ in range(20)]
        for cid in ids:
            store.insert(cid, [user("hello")])
            store.build_prompt(cid, 1000)
            store.token_series(cid)
        cache = store._core.cache
        assert len(cache) == 4
        assert all(cache.peek(cid) is None for cid in ids[:16])
        assert [len(store.visible(cid).messages) for cid in ids] == [1] * 20


def test_a_context_whose_lock_is_held_is_not_evicted():
    cache = ContextCache(2)
    a, b, c = (object() for _ in range(3))
    held_a = cache.held(a)
    with held_a.lock:
        cache.held(b)
        cache.held(c)  # evicts b, the oldest not in use
        assert cache.peek(a) is held_a and cache.peek(b) is None
