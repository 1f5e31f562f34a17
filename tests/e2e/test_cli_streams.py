"""Streamed replies and the live tail on the command line."""

import json
import threading
import time

from ctxstore.adapters.store.facade import ContextStore


def test_stream_stores_stdin_deltas_and_the_steps_recover_a_reply(cli):
    cid = json.loads(cli("create", "--name", "s", "--json").stdout)["context_id"]
    cli("insert", cid, "--content", "hi")
    chunks = [{"choices": [{"index": 0, "delta": {"content": w}}]} for w in ("Hel", "lo")]
    cli("stream", cid, input="\n".join(json.dumps(c) for c in chunks) + "\n")
    reply = json.loads(cli("begin", cid, "--json").stdout)["ids"][0]
    cli("append", cid, reply, input='{"text": "half"}\n')
    shown = cli("show", cid).stdout
    assert "[streaming] half" in shown
    cli("abandon", cid, reply, "--reason", "gone")
    cli("finish", cid, reply, code=1)  # refused: it is abandoned (a one-line error)
    log = json.loads(cli("log", cid, "--json").stdout)
    assert [e["type"] for e in log][2:] == [
        "begin",
        "append",
        "finish",
        "begin",
        "append",
        "abandon",
    ]
    with ContextStore.from_url(cli.url) as store:
        assert [m.content for m in store.visible(cid).messages][1:] == ["Hello", "half"]


def test_tail_prints_events_as_they_are_written(cli):
    cid = json.loads(cli("create", "--name", "t", "--json").stdout)["context_id"]
    out: list[str] = []

    def follow() -> None:
        out.append(cli("tail", cid, "--after", "0", "--idle", "1.5", "--json").stdout)

    t = threading.Thread(target=follow)
    t.start()
    time.sleep(0.3)
    with ContextStore.from_url(cli.url) as store:  # another store: the tail sees its writes
        store.insert(cid, {"role": "user", "content": "live"})
        with store.stream(cid) as reply:
            reply.add({"text": "ok"})
    t.join(20)
    events = [json.loads(line) for line in out[0].splitlines()]
    assert [e["type"] for e in events] == ["create", "insert", "begin", "append", "finish"]
    assert events[3]["payload"]["deltas"] == [{"text": "ok"}]
    table = cli("tail", cid, "--after", "2", "--idle", "0.2").stdout
    assert "begin" in table and "append" in table and "'ok'" in table
