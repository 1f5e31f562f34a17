"""Captured calls: recorded as the provider received them, without touching the context's
messages; a retried recording is recorded once; a failed call reads as failed; the
background recorder never raises into the application nor makes it wait on a dead store."""

from __future__ import annotations

import socket
import threading

import pytest

import ctxstore
from ctxstore import InvalidOperationError
from ctxstore.adapters.http.client import CtxStoreClient
from ctxstore.adapters.store.parts import parts_of
from ctxstore.capture import CallRecorder, CapturedCall

REQUEST = {
    "model": "gpt-4o", "instructions": "Be brief.",
    "input": [{"role": "user", "content": "Weather in Paris?"}],
    "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}],
    "temperature": 0.2,
}  # fmt: skip
RESPONSE = {
    "id": "resp_1", "object": "response", "model": "gpt-4o-2024-08-06", "status": "completed",
    "output": [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": "14 degrees.", "annotations": []}]}],
    "usage": {"input_tokens": 31, "output_tokens": 4, "total_tokens": 35},
}  # fmt: skip


def test_a_captured_call_holds_the_bodies_and_writes_no_message(durable_url):
    with ctxstore.open(durable_url) as store:
        cid = store.create(name="chat")
        store.insert(cid, [{"role": "user", "content": "Weather in Paris?"}])
        before = store.visible(cid).messages
        call = CapturedCall(request=REQUEST, response=RESPONSE, source="agents",
                            api="openai.responses", latency=0.25, for_version=2)  # fmt: skip
        first = store.record_call(cid, call)
        again = store.record_call(cid, call)  # a retry after a lost reply
        assert again.version == first.version
        failed = CapturedCall(request=REQUEST, error="RateLimitError: slow down", source="agents")
        store.record_call(cid, failed)
        assert store.visible(cid).messages == before  # capture inserts nothing
        listed = store.calls(cid)
        assert [c.source for c in listed] == ["agents", "agents"]
        assert [c.failed for c in listed] == [False, True]
        one = store.call(cid, 1)
        assert one.request == REQUEST and one.response_body == RESPONSE
        assert one.model == "gpt-4o-2024-08-06" and one.prompt_tokens == 31
        assert one.completion_tokens == 4 and one.for_version == 2 and one.latency_ms == 250
        assert [m.role for m in one.messages or []] == ["system", "user"]
        assert [m.format for m in one.response or []] == ["openai-responses"]
        assert store.call(cid, 2).error == "RateLimitError: slow down"
        assert [u.calls for u in store.usage_report(context_id=cid)] == [1]  # not the failed
        assert store.verify(cid).ok


def test_bad_calls_are_refused_naming_what_is_wrong():
    store = ctxstore.open("memory://")
    cid = store.create()
    with pytest.raises(InvalidOperationError, match="response or an error"):
        store.record_call(cid, {"request": {"model": "m"}})
    with pytest.raises(InvalidOperationError, match="api"):
        store.record_call(cid, {"request": {}, "error": "x", "api": "nope"})
    with pytest.raises(InvalidOperationError, match="request"):
        store.record_call(cid, {"request": "not an object", "error": "x"})
    assert store.visible(cid).version == 1


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Watched:
    """A surface that notes which threads call its methods (the recorder looks for an
    async store's `sync` twin; its absence reads as None)."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.threads: set[str] = set()

    def __getattr__(self, name: str) -> object:
        found = getattr(self.inner, name)
        if not callable(found):
            return found

        def called(*args: object, **kwargs: object) -> object:
            self.threads.add(threading.current_thread().name)
            return found(*args, **kwargs)

        return called


def test_the_recorder_never_raises_nor_waits_on_an_unreachable_store():
    client = _Watched(CtxStoreClient(f"http://127.0.0.1:{_closed_port()}"))
    recorder = CallRecorder(client)
    call = CapturedCall(request=REQUEST, response=RESPONSE, source="agents")
    for _ in range(50):
        recorder.submit("session-1", call)
    # enqueued, not written: the application's thread never reaches the store
    assert threading.current_thread().name not in client.threads
    recorder.close(timeout=1.0)
    assert recorder.flush(3)  # the call in the writer's hand ends at its next try
    stats = recorder.stats
    assert stats.submitted == 50 and stats.recorded == 0
    assert stats.failed + stats.dropped == 50
    recorder.submit("session-1", call)  # after close: counted, not raised
    assert recorder.stats.dropped >= 1


def test_the_recorder_drops_past_its_queue_and_counts(tmp_path):
    store = ctxstore.open(f"sqlite:///{tmp_path / 's.db'}")
    cid = store.create()
    recorder = CallRecorder(store, maxsize=2)
    with parts_of(store).core.cache.held(cid).lock:  # the writer waits on the context meanwhile
        for _ in range(10):
            recorder.submit(cid, CapturedCall(request=REQUEST, response=RESPONSE))
    assert recorder.flush(10)
    stats = recorder.stats
    assert stats.recorded + stats.dropped == 10 and stats.dropped >= 7
    assert len(store.calls(cid)) == stats.recorded


def test_the_recorder_never_waits_on_a_sqlite_file_another_process_locks(tmp_path):
    import sqlite3

    path = tmp_path / "locked.db"
    store = ctxstore.open(f"sqlite:///{path}")
    cid = store.create()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another process's long write transaction
    try:
        watched = _Watched(store)
        recorder = CallRecorder(watched)
        for _ in range(20):
            recorder.submit(cid, CapturedCall(request=REQUEST, response=RESPONSE))
        assert threading.current_thread().name not in watched.threads
        # close gives up what is left rather than wait out the 30 s lock
        recorder.close(timeout=1.0)
        assert not recorder.flush(0) or recorder.stats.failed >= 19
        # Given up and counted (the one in the writer's hand is counted when it ends).
        assert recorder.stats.recorded == 0 and recorder.stats.failed >= 19
    finally:
        holder.execute("ROLLBACK")
        holder.close()
