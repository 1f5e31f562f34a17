"""The line saying what each event did (the live tail's `what`, `ctxstore tail`, the web
view's timeline), for every kind of event."""

from ctxstore.adapters.store.facade import ContextStore


def test_each_event_says_what_it_did():
    with ContextStore.from_url("memory://") as store:
        cid = store.create(name="support")
        ids = store.insert(
            cid,
            [
                {"role": "system", "content": "Be terse."},
                {"role": "user", "content": "Where is my order?"},
            ],
        ).ids
        store.replace(cid, ids[1], {"role": "user", "content": "Where is order 1042?"})
        summary = store.compress(cid, ids, {"role": "user", "content": "Asked about 1042."}).ids[0]
        store.expand(cid, summary)
        store.batch_start(cid)
        store.insert(cid, {"role": "system", "content": "temporary " * 40})
        store.batch_end(cid)
        store.batch_start(cid)
        store.batch_end(cid, keep=True)
        store.record_usage(cid, model="gpt-4o", prompt_tokens=1200, completion_tokens=30,
                           latency=1.5)  # fmt: skip
        reply = store.begin(cid).ids[0]
        store.append(cid, reply, [{"content": "It ships "}, {"content": "Friday."}])
        store.finish(cid, reply)
        other = store.begin(cid).ids[0]
        store.abandon(cid, other, reason="user left")
        store.delete(cid, [reply])
        lines = [e.what for e in store.hooks.events_after(cid, 0)]
        fork = store.fork(cid, at_version=3)
        forked = store.hooks.events_after(fork, 0)[-1].what
    assert lines[0] == "created “support”"
    assert lines[1] == "system: Be terse. (+1 more)"
    assert lines[2] == f"{ids[1]} → Where is order 1042?"
    assert lines[3].startswith("2 messages → summary: Asked about 1042. (")
    assert lines[4] == f"summary {summary} expanded back into 2 messages"
    assert lines[5] == "opened batch 1"
    assert lines[6].startswith("system: temporary temporary") and lines[6].endswith("…")
    assert lines[7] == "closed batch 1, rolled back to batch 0: undid v6–v7"
    assert lines[8:10] == ["opened batch 1", "closed batch 1, kept"]
    assert lines[10] == "call: gpt-4o, 1,200 in / 30 out in 1,500 ms, made with v10"
    assert lines[11] == "assistant reply begins"
    assert lines[12] == f"streamed 16 chars in 1 delta into {reply}"  # merged as stored
    assert lines[13].startswith(f"reply {reply} finished (") and lines[13].endswith(" tokens)")
    assert lines[15] == f"reply {other} abandoned: user left (kept)"
    assert lines[16] == f"deleted {reply}"
    assert forked.startswith(f"forked from {cid.hex[:8]}")
