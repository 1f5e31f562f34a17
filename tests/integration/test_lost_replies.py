"""A command takes effect exactly once when the reply to its committed write is lost: the
library retries, meets the events it stored itself, and the store recognises them by the
command id they carry (instead of applying the command a second time)."""

import pytest

from ctxstore.adapters.store.facade import ContextStore

pytestmark = [pytest.mark.postgres, pytest.mark.slow]  # slow: a proxy losing replies


def turn(n: int) -> list[dict]:
    call = {"id": f"call_{n}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    return [
        {"role": "user", "content": f"question {n}"},
        {"role": "assistant", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"call_{n}", "content": f"result {n}. " + "row " * 60},
        {"role": "assistant", "content": f"answer {n}. " + "It holds, as the rows show. " * 4},
    ]


def versions(store: ContextStore, cid) -> list[str]:
    return [h.type for h in store.history(cid)]


def test_an_insert_whose_reply_is_lost_is_stored_once(proxied_store, losing_proxy):
    store, proxy = proxied_store, losing_proxy
    cid = store.create()
    proxy.arm()
    w = store.insert(cid, [{"role": "user", "content": "once"}])
    assert proxy.lost == 1
    assert w.version == 2 and versions(store, cid) == ["create", "insert"]
    assert [m.text() for m in store.visible(cid).messages] == ["once"]
    assert store.verify(cid).ok


def test_a_conditional_write_whose_reply_is_lost_succeeds(proxied_store, losing_proxy):
    store, proxy = proxied_store, losing_proxy
    cid = store.create()
    store.insert(cid, turn(0))
    proxy.arm()
    w = store.insert(cid, turn(1), expected_version=2)
    assert proxy.lost == 1 and w.version == 3
    proxy.arm()
    ids = [m.id for m in store.visible(cid).messages][:4]
    w = store.compress(cid, ids, "turn 0 in short", expected_version=3)
    assert proxy.lost == 2 and w.version == 4
    assert versions(store, cid) == ["create", "insert", "insert", "compress"]


def test_a_compaction_whose_reply_is_lost_is_written_once(proxied_store, losing_proxy):
    store, proxy = proxied_store, losing_proxy
    cid = store.create()
    for n in range(8):
        store.insert(cid, turn(n))
    proxy.arm()
    done = store.compact(cid)
    assert proxy.lost == 1 and done.summary_id is not None
    assert versions(store, cid).count("compress") == 1


def test_a_creation_whose_reply_is_lost_is_not_taken_for_another(proxied_store, losing_proxy):
    store, proxy = proxied_store, losing_proxy
    proxy.arm()
    cid = store.create(name="lost reply")
    assert proxy.lost == 1 and versions(store, cid) == ["create"]
    proxy.arm()
    keyed = store.context_for_key("session-1")
    assert proxy.lost == 2 and versions(store, keyed) == ["create"]
