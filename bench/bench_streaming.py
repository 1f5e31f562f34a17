"""Streamed replies and the live tail, each target a ratio or a latency measured in one run.

- stream: a 2,000-token reply streamed in 20-token deltas through `stream()` (the default
  batching) against storing the finished reply once (`insert`), per reply; also with every
  delta written (`StreamPolicy(interval=0)`) to show what batching saves. Target <= 3x.
- head: reading the head (`visible()` and `build_prompt()`) of a 200-message context whose
  newest reply is incomplete, against the same context with it finished. Target ~1x.
- tail: the HTTP service (`ctxstore serve`, its own process) on PostgreSQL with 100 live
  tail clients (another process, asyncio); a writer (a third: another store, so wake-ups
  arrive by NOTIFY) inserts into their contexts. Latency from the writer's commit (its
  insert returned) to a client's receipt; median and p95. Target: median <= 50 ms.

    python bench/bench_streaming.py [--pg postgresql://postgres@127.0.0.1:5432/postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from scratch_pg import scratch_databases

from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.adapters.store.reply_stream import StreamPolicy

WORDS = ["the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "while", "the", "model", "streams", "its", "answer", "token", "by", "token", "and", "ctxstore", "keeps", "every", "delta", "it", "receives"]  # fmt: skip


def reply_text(counter: Any, tokens: int) -> list[str]:
    """Deltas of about 20 tokens each, making a reply of about `tokens` tokens."""
    deltas: list[str] = []
    n = 0
    while sum(counter.count(d) for d in deltas) < tokens:
        deltas.append(" ".join(WORDS[(n + k) % len(WORDS)] for k in range(19)) + " ")
        n += 19
    return deltas


def bench_stream(url: str, label: str, replies: int) -> None:
    with ContextStore.from_url(url, Settings(actor="bench")) as store:
        c = store.create(model="gpt-4o")
        deltas = reply_text(store.tokenizers.counter("o200k_base"), 2000)
        text = "".join(deltas)
        once, batched, each = [], [], []
        for n in range(replies):
            store.insert(c, {"role": "user", "content": f"question {n}"})
            t = time.perf_counter()
            store.insert(c, {"role": "assistant", "content": text})
            once.append(time.perf_counter() - t)
            store.insert(c, {"role": "user", "content": f"again {n}"})
            t = time.perf_counter()
            with store.stream(c) as reply:
                for d in deltas:
                    reply.add({"text": d})
            batched.append(time.perf_counter() - t)
            writes = reply.writes
            if n < max(3, replies // 4):
                store.insert(c, {"role": "user", "content": f"once more {n}"})
                t = time.perf_counter()
                with store.stream(c, policy=StreamPolicy(interval=0)) as reply:
                    for d in deltas:
                        reply.add({"text": d})
                each.append(time.perf_counter() - t)
        ms = statistics.median
        print(f"{label}: a {len(deltas)}-delta reply of ~2,000 tokens ({len(text):,} chars)")
        print(f"  insert once        {ms(once) * 1e3:7.2f} ms")
        print(f"  stream (batched)   {ms(batched) * 1e3:7.2f} ms  = {ms(batched) / ms(once):.2f}x "
              f"(target <= 3x; {writes} writes)")  # fmt: skip
        print(f"  stream (each delta){ms(each) * 1e3:7.2f} ms  = {ms(each) / ms(once):.2f}x "
              f"({len(deltas) + 1} writes)")  # fmt: skip


def bench_head(url: str, label: str, reads: int) -> None:
    with ContextStore.from_url(url, Settings(actor="bench")) as store:

        def context(finish: bool) -> Any:
            c = store.create(model="gpt-4o")
            for n in range(100):
                store.insert(c, [{"role": "user", "content": f"q{n} " + " ".join(WORDS)},
                                 {"role": "assistant", "content": " ".join(WORDS * 3)}])  # fmt: skip
            reply = store.stream(c)
            reply.add({"text": " ".join(WORDS * 3)})
            reply.finish() if finish else reply.flush()
            return c

        done, open_ = context(True), context(False)
        timings: dict[Any, list[float]] = {done: [], open_: []}
        for _ in range(reads):
            for c in (done, open_):
                t = time.perf_counter()
                store.visible(c)
                store.build_prompt(c, 100_000)
                timings[c].append(time.perf_counter() - t)
        a, b = statistics.median(timings[done]), statistics.median(timings[open_])
        print(f"{label}: head of 202 messages (visible + build_prompt): finished {a * 1e3:.2f} ms,"
              f" incomplete {b * 1e3:.2f} ms = {b / a:.2f}x (target ~1x)")  # fmt: skip


# ---- the live tail ------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tail_clients(
    base: str, contexts: list[str], per: int, ready: Any, out: Any, seconds: float
) -> None:
    """Follow each context with `per` clients; put (context, version, receipt time) rows."""
    import httpx

    async def follow(
        client: httpx.AsyncClient, cid: str, rows: list[tuple[str, int, float]]
    ) -> None:
        async with client.stream("GET", f"{base}/v1/contexts/{cid}/events",
                                 headers={"Accept": "text/event-stream"}) as r:  # fmt: skip
            ready.put(1)
            async for line in r.aiter_lines():
                if line.startswith("id: "):
                    rows.append((cid, int(line[4:]), time.time()))

    async def main() -> list[tuple[str, int, float]]:
        rows: list[tuple[str, int, float]] = []
        limits = httpx.Limits(max_connections=len(contexts) * per + 10)
        async with httpx.AsyncClient(timeout=httpx.Timeout(10, read=None), limits=limits) as client:
            tasks = [
                asyncio.create_task(follow(client, c, rows)) for c in contexts for _ in range(per)
            ]
            await asyncio.sleep(seconds)
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        return rows

    out.put(asyncio.run(main()))


def bench_tail(url: str, clients: int, spread: bool) -> None:
    port = free_port()
    env = {**os.environ, "CTXSTORE_URL": url, "CTXSTORE_SERVICE__TAIL_MAX_CLIENTS": "2000"}
    server = subprocess.Popen(
        [sys.executable, "-c", "from ctxstore.adapters.cli import main; main()", "serve",
         "--port", str(port)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("the service did not start") from None
                time.sleep(0.1)
        with ContextStore.from_url(url, Settings(actor="bench")) as writer:
            n_contexts = clients if spread else 1
            contexts = [str(writer.create(name=f"tail {n}")) for n in range(n_contexts)]
            ready: multiprocessing.Queue[int] = multiprocessing.Queue()
            out: multiprocessing.Queue[list[tuple[str, int, float]]] = multiprocessing.Queue()
            rounds = 3 if spread else 30
            seconds = 4 + rounds * n_contexts * 0.012 + rounds * 0.05
            proc = multiprocessing.Process(
                target=tail_clients,
                args=(base, contexts, clients // n_contexts, ready, out, seconds),
            )
            proc.start()
            for _ in range(clients):
                ready.get(timeout=30)
            time.sleep(0.5)
            committed: dict[tuple[str, int], float] = {}
            for _ in range(rounds):
                for c in contexts:
                    w = writer.insert(c, {"role": "user", "content": "a line for the tail"})
                    committed[(c, w.version)] = time.time()
                    time.sleep(0.01 if spread else 0.05)
            rows = out.get(timeout=seconds + 30)
            proc.join()
        latencies = sorted((t - committed[(c, v)]) * 1e3 for c, v, t in rows if (c, v) in committed)
        expected = len(committed) * (clients // n_contexts)
        how = f"{clients} clients on {n_contexts} context(s)"
        print(f"tail, PostgreSQL, {how}: {len(latencies)}/{expected} deliveries; commit -> "
              f"receipt median {statistics.median(latencies):.1f} ms, p95 "
              f"{latencies[int(len(latencies) * 0.95)]:.1f} ms (target median <= 50 ms)")  # fmt: skip
    finally:
        server.terminate()
        server.wait(timeout=15)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pg", default=os.environ.get(
        "CTXSTORE_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres"))  # fmt: skip
    parser.add_argument("--replies", type=int, default=20)
    parser.add_argument("--skip-pg", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bench_stream(f"sqlite:///{Path(tmp) / 's.db'}", "SQLite", args.replies)
        bench_head(f"sqlite:///{Path(tmp) / 'h.db'}", "SQLite", 50)
    if args.skip_pg:
        return
    with scratch_databases(args.pg) as make:
        bench_stream(make(), "PostgreSQL", args.replies)
        bench_head(make(), "PostgreSQL", 50)
        bench_tail(make(), 100, spread=True)
        bench_tail(make(), 100, spread=False)


if __name__ == "__main__":
    main()
