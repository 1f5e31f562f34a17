"""Writer processes for the reliability checks (tests/integration/test_reliability.py and
bench/bench_reliability.py).

    python bench/workers.py mixed URL CONTEXT TAG COMMANDS SEED   # prints one JSON line per ack
    python bench/workers.py crashy URL CONTEXT TAG ACK_FILE       # appends and compacts until killed
    python bench/workers.py appends URL CONTEXT|new COUNT START   # timed appends (bench_scaling)
                                                     # (URL: shards:URL,URL,... for a sharded store)
    python bench/workers.py raw DSN TABLE COUNT START             # timed plain rows (the floor)

`mixed` runs a random mix of commands on one shared context: appends (most without an
expected version, some with one), batches rolled back or kept, compressions of two
neighbours and deletions. Every acknowledged command prints {"tag", "op", "version"};
refusals a racing writer causes (typed ctxstore errors) are counted, anything else crashes.

`crashy` appends and compacts in a loop, writing each acknowledged version to ACK_FILE and
fsyncing it before going on, so that a SIGKILL at any moment leaves a file of writes the
store acknowledged.
"""

from __future__ import annotations

import json
import os
import random
import sys
from collections import Counter
from typing import Any

from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.domain.errors import CtxStoreError, NothingToSummarizeError


def ack(tag: str, op: str, version: int, **extra: Any) -> None:
    print(json.dumps({"tag": tag, "op": op, "version": version, **extra}), flush=True)


def mixed(url: str, cid: str, tag: str, commands: int, seed: int) -> None:
    rng = random.Random(seed)
    refused: Counter[str] = Counter()
    with ContextStore.from_url(url, Settings(snapshot_interval=16, actor=tag)) as store:
        for n in range(commands):
            text = f"{tag}-{n}"
            roll = rng.random()
            try:
                if roll < 0.55:
                    w = store.insert(cid, [{"role": "user", "content": text}])
                    ack(tag, "insert", w.version, text=text)
                elif roll < 0.65:
                    head = store.visible(cid).version
                    w = store.insert(
                        cid, [{"role": "user", "content": text}], expected_version=head
                    )
                    ack(tag, "insert", w.version, text=text)
                elif roll < 0.80:
                    w = store.batch_start(cid)
                    ack(tag, "batch_start", w.version)
                    w = store.insert(cid, [{"role": "assistant", "content": text}])
                    ack(tag, "insert", w.version, text=text)
                    w = store.batch_end(cid, keep=rng.random() < 0.5)
                    ack(tag, "batch_end", w.version)
                elif roll < 0.92:
                    seen = store.visible(cid)
                    if len(seen.messages) >= 2:
                        i = rng.randrange(len(seen.messages) - 1)
                        pair = [m.id for m in seen.messages[i : i + 2] if m.id]
                        w = store.compress(cid, pair, f"summary by {text}",
                                           expected_version=seen.version)  # fmt: skip
                        ack(tag, "compress", w.version, text=f"summary by {text}")
                else:
                    seen = store.visible(cid)
                    if seen.messages:
                        victim = rng.choice(seen.messages).id
                        assert victim is not None
                        w = store.delete(cid, [victim], expected_version=seen.version)
                        ack(tag, "delete", w.version)
            except CtxStoreError as exc:  # a racing writer changed the context first
                refused[type(exc).__name__] += 1
    print(json.dumps({"tag": tag, "refused": dict(refused)}), flush=True)


def _opened(url: str) -> Any:
    """A store at `url`, or over the servers of `shards:URL,URL,...`."""
    if url.startswith("shards:"):
        from ctxstore.adapters.store.shards.store import ShardedStore

        return ShardedStore.from_urls(url[len("shards:") :].split(","), Settings(actor="scaling"))
    return ContextStore.from_url(url, Settings(actor="scaling"))


def appends(url: str, cid: str, count: int, start_at: float) -> None:
    """Append `count` single messages to a context ("new": its own), starting at a moment
    shared with the other writers; prints the seconds it took."""
    import time

    with _opened(url) as store:
        target = store.create(name="scaling") if cid == "new" else cid
        store.insert(target, [{"role": "user", "content": "warm up"}])
        while time.time() < start_at:
            time.sleep(0.001)
        began = time.perf_counter()
        cpu = time.process_time()
        done = gave_up = 0
        why: dict[str, int] = {}
        for n in range(count):
            try:
                store.insert(target, [{"role": "user", "content": f"append {n} " + "words " * 30}])
                done += 1
            except CtxStoreError as exc:  # refused, typed: say which refusal
                gave_up += 1
                reason = f"{type(exc).__name__}: {str(exc)[:80]}"
                why[reason] = why.get(reason, 0) + 1
        elapsed = time.perf_counter() - began
        cpu = time.process_time() - cpu
        print(json.dumps({"seconds": elapsed, "count": done, "gave_up": gave_up, "why": why,
                          "cpu": cpu}), flush=True)  # fmt: skip


def raw_rows(url: str, table: str, count: int, start_at: float) -> None:
    """The floor: `count` rows like an append's event row, each its own transaction, on
    one connection, inserted by plain psycopg (no store); prints the seconds it took."""
    import time
    import uuid

    import psycopg

    state = os.urandom(420)
    cid = uuid.uuid4()
    with psycopg.connect(url, autocommit=True) as conn:
        insert = (
            f"INSERT INTO {table} (originator_id, originator_version, topic, state) "
            "VALUES (%s, %s, %s, %s)"
        )
        conn.execute(insert, (cid, 0, "warm", state), prepare=True)
        while time.time() < start_at:
            time.sleep(0.001)
        began = time.perf_counter()
        cpu = time.process_time()
        for n in range(1, count + 1):
            conn.execute(insert, (cid, n, "ctxstore.domain.context:Context.Inserted", state),
                         prepare=True)  # fmt: skip
        elapsed = time.perf_counter() - began
        print(json.dumps({"seconds": elapsed, "count": count, "gave_up": 0, "why": {},
                          "cpu": time.process_time() - cpu}), flush=True)  # fmt: skip


def crashy(url: str, cid: str, tag: str, ack_file: str) -> None:
    settings = Settings(snapshot_interval=8, actor=tag)
    with (
        ContextStore.from_url(url, settings) as store,
        open(ack_file, "a", encoding="utf-8") as acks,
    ):
        n = 0
        while True:
            n += 1
            text = f"{tag}-{n}"
            w = store.insert(cid, [{"role": "user", "content": f"{text} question. more"},
                                   {"role": "assistant", "content": f"{text} answer."}])  # fmt: skip
            acks.write(json.dumps({"version": w.version, "text": text}) + "\n")
            acks.flush()
            os.fsync(acks.fileno())
            if n % 7 == 0:
                try:
                    done = store.compact(cid)
                except NothingToSummarizeError:
                    continue
                if done.version is not None:
                    acks.write(json.dumps({"version": done.version, "compact": True}) + "\n")
                    acks.flush()
                    os.fsync(acks.fileno())


if __name__ == "__main__":
    mode, *args = sys.argv[1:]
    if mode == "mixed":
        mixed(args[0], args[1], args[2], int(args[3]), int(args[4]))
    elif mode == "appends":
        appends(args[0], args[1], int(args[2]), float(args[3]))
    elif mode == "raw":
        raw_rows(args[0], args[1], int(args[2]), float(args[3]))
    elif mode == "crashy":
        crashy(args[0], args[1], args[2], args[3])
    else:
        raise SystemExit(f"unknown mode {mode!r}")
