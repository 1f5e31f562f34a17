"""Replies stored while they stream, on every backend: batching, reads while streaming,
snapshots holding a streamed message, a writer killed mid-stream."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.adapters.store.reply_stream import StreamPolicy
from ctxstore.domain.errors import InvalidOperationError, LimitExceededError
from ctxstore.domain.streaming import INCOMPLETE, incomplete_state


def chunk(text: str) -> dict:
    return {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o",
            "choices": [{"index": 0, "delta": {"content": text}}]}  # fmt: skip


def test_a_streamed_reply_is_batched_readable_and_finished(store: ContextStore):
    c = store.create(name="s", model="gpt-4o")
    store.insert(c, {"role": "user", "content": "Tell me a story."})
    words = [f"word{n} " for n in range(300)]
    with store.stream(c, policy=StreamPolicy(interval=3600, max_chars=1000)) as reply:
        for n, w in enumerate(words):
            reply.add(chunk(w))
            if n == 150:
                seen = store.visible(c).messages[-1]
                assert incomplete_state(seen) == "streaming"
                assert str(seen.content).startswith("word0 word1")
    text = "".join(words)
    assert reply.writes == 2 + len(text) // 1000  # begin, an append per 1,000 chars, finish
    done = store.visible(c)
    assert done.messages[-1].content == text and INCOMPLETE not in done.messages[-1].metadata
    fresh = ContextStore.from_url("memory://")  # the same count, once, as an insert makes it
    other = fresh.create(model="gpt-4o")
    fresh.insert(other, [{"role": "user", "content": "Tell me a story."},
                         {"role": "assistant", "content": text}])  # fmt: skip
    assert done.tokens == fresh.visible(other).tokens
    types = [h.type for h in store.history(c)]
    assert types[:3] == ["create", "insert", "begin"] and types[-1] == "finish"
    assert set(types[3:-1]) == {"append"}
    assert store.verify(c).broken == []


def test_reads_at_every_version_and_after_reopening_agree(store_url: str):
    settings = Settings(snapshot_interval=3, actor="t")
    with ContextStore.from_url(store_url, settings) as s:
        c = s.create(name="s")
        s.insert(c, {"role": "user", "content": "q"})
        for n in range(4):
            r = s.stream(c, policy=StreamPolicy(interval=0))  # every add is a write
            for k in range(5):
                r.add({"text": f"{n}.{k} "})
            if n % 2:
                r.abandon("stopped")
            else:
                r.finish()
        s.insert(c, {"role": "user", "content": "next"})
        head = s.visible(c)
        then = [s.visible(c, at_version=v).model_dump() for v in range(1, head.version + 1)]
        if store_url.startswith("memory"):
            return
    with ContextStore.from_url(store_url, settings) as again:  # from snapshots and events
        assert again.visible(c).model_dump() == head.model_dump()
        for v in range(1, head.version + 1):
            assert again.visible(c, at_version=v).model_dump() == then[v - 1]
        abandoned = [m for m in head.messages if incomplete_state(m) == "abandoned"]
        assert [m.content for m in abandoned] == ["1.0 1.1 1.2 1.3 1.4 ", "3.0 3.1 3.2 3.3 3.4 "]
        assert again.verify(c).broken == []


def test_a_prompt_sends_an_unfinished_reply_repaired(store: ContextStore):
    c = store.create(name="s", model="gpt-4o")
    store.insert(c, {"role": "user", "content": "Weather?"})
    w = store.begin(c)
    call = {"index": 0, "id": "call_9", "type": "function",
            "function": {"name": "weather", "arguments": '{"ci'}}  # fmt: skip
    store.append(c, w.ids[0], [chunk("Checking "),
                               {"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}])  # fmt: skip
    prompt = store.build_prompt(c, 10_000)
    assert prompt.to_openai()[-1] == {"role": "assistant", "content": "Checking"}
    assert [o.id for o in prompt.omitted] == [w.ids[0]]
    assert prompt.tokens < store.visible(c).tokens  # the dropped call is not counted
    assert store.visible(c).to_openai()[-1]["content"] == "Checking"


def test_refusals_write_nothing(store: ContextStore):
    c = store.create(name="s")
    store.insert(c, {"role": "user", "content": "q"})
    reply = store.begin(c).ids[0]
    version = store.visible(c).version
    for bad in ([{"text": 1}], [{"call": {"index": 1, "arguments": "x"}}], "text", [[1]]):
        with pytest.raises(InvalidOperationError):
            store.append(c, reply, bad)
    with pytest.raises(LimitExceededError):
        store.append(c, reply, [{"text": "x" * (store.settings.max_message_bytes + 1)}])
    store.finish(c, reply, deltas=[{"text": "done"}])
    with pytest.raises(InvalidOperationError, match="finished"):
        store.append(c, reply, [{"text": "more"}])
    assert store.visible(c).version == version + 2  # the finish: its deltas and itself
    assert store.visible(c).messages[-1].content == "done"


def test_a_block_that_raises_abandons_the_reply_keeping_what_arrived(store: ContextStore):
    c = store.create(name="s")
    store.insert(c, {"role": "user", "content": "q"})
    with pytest.raises(TimeoutError), store.stream(c) as reply:
        reply.add({"text": "half an ans"})
        raise TimeoutError("the provider stopped answering")
    last = store.visible(c).messages[-1]
    assert last.content == "half an ans"
    assert last.metadata[INCOMPLETE] == {
        "state": "abandoned",
        "reason": "TimeoutError: the provider stopped answering",
    }
    hidden = store.stream(c)
    hidden.add({"text": "gone"})
    hidden.abandon(keep=False)
    assert store.visible(c).messages[-1].id == last.id


WRITER = textwrap.dedent(
    """
    import sys, time
    from ctxstore.adapters.store.facade import ContextStore
    from ctxstore.adapters.store.reply_stream import StreamPolicy
    store = ContextStore.from_url(sys.argv[1])
    reply = store.stream(sys.argv[2], policy=StreamPolicy(interval=0))
    n = 0
    while True:
        reply.add({"text": f"t{n} "})
        n += 1
        if n == 20:
            print(reply.id, flush=True)
        time.sleep(0.002)
    """
)


def test_a_writer_killed_mid_stream_leaves_the_reply_incomplete_and_recoverable(durable_url):
    with ContextStore.from_url(durable_url) as store:
        c = store.create(name="s")
        store.insert(c, {"role": "user", "content": "q"})
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, durable_url, str(c)], stdout=subprocess.PIPE,
            text=True, env={**os.environ, "CTXSTORE_ACTOR": "writer"},
        )  # fmt: skip
        try:
            reply = (proc.stdout.readline() if proc.stdout else "").strip()
            time.sleep(0.1)
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        assert reply
        seen = store.visible(c).messages[-1]
        assert seen.id == reply and incomplete_state(seen) == "streaming"
        text = str(seen.content)
        words = text.split()
        assert len(words) >= 20 and words == [f"t{n}" for n in range(len(words))]
        assert store.verify(c).broken == []
        store.finish(c, reply, deltas=[{"text": "(recovered)"}])
        assert store.visible(c).messages[-1].content == text + "(recovered)"


def test_a_follower_sees_another_stores_writes_in_order(store_url: str):
    with ContextStore.from_url(store_url) as reader:
        writer = reader if store_url.startswith("memory") else ContextStore.from_url(store_url)
        c = writer.create(name="followed")
        seen: list = []

        def follow() -> None:
            for e in reader.follow(c, idle=3):
                seen.append(e.version)
                if len(seen) == 6:
                    return

        t = threading.Thread(target=follow)
        t.start()
        time.sleep(0.2)
        with writer.stream(c, policy=StreamPolicy(interval=0)) as reply:
            for n in range(4):
                reply.add({"text": str(n)})
        t.join(10)
        assert seen == [2, 3, 4, 5, 6, 7]  # begin, four appends, finish
        assert [e.version for e in reader.follow(c, after=5, idle=0.2)] == [6, 7]
        if writer is not reader:
            writer.close()
