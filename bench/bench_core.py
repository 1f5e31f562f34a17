"""Core benchmark: ctxstore against the raw driver floor, head reads, rollback, time travel.

Prints ratios measured in one run (absolute figures swing between runs on shared machines).
Usage: python bench/bench_core.py [--pg DSN] [--appends N] [--skip-pg]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import psycopg

from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore

sys.path.insert(0, str(Path(__file__).parent))
from append_parts import measure, report
from floor import Floor, RawPostgres, RawSQLite

VISIBLE = 50  # visible messages in the head-read, rollback and time-travel contexts
HISTORY = 10_000
INTERVAL = Settings().snapshot_interval  # the shipped default


def text(n: int) -> str:
    words = [
        "the",
        "agent",
        "called",
        "the",
        "weather",
        "tool",
        "and",
        "summarised",
        "what",
        "it",
        "returned",
        "for",
        "the",
        "user",
    ]
    rng = random.Random(n)
    return " ".join(rng.choice(words) for _ in range(48))[:300]


def timed(fn: Callable[[], object], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def med(xs: list[float]) -> float:
    return statistics.median(xs)


# ---- ctxstore --------------------------------------------------------------------------


class RecorderClock:
    """Seconds spent inside the recorder's inserts (connection, BEGIN, INSERT, COMMIT): the
    part of an append the database holds, timed in place on the store's own recorder."""

    def __init__(self, store: ContextStore) -> None:
        self.seconds = 0.0
        recorder = store._storage.recorder
        for name in ("insert_events", "insert_events_on"):
            if hasattr(recorder, name):
                setattr(recorder, name, self.timing(getattr(recorder, name)))

    def timing(self, insert: Callable[..., Any]) -> Callable[..., Any]:
        def timed_insert(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return insert(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - t

        return timed_insert


def appends(
    store: ContextStore, n: int, floor: Callable[[], Floor], block: int = 100
) -> tuple[float, float, list[float], int, float]:
    """(ctxstore's appends/s, the raw floor's rows/s, each append's seconds, row bytes,
    seconds of the appends spent in the recorder's transactions).

    The two take turns, `block` writes at a time, so a drift of this shared machine's speed
    falls on both alike; the floor's rows are as large as ctxstore's stored events.
    """
    cid = store.create(actor="bench")
    for i in range(VISIBLE):  # warm up (and fill) before timing
        store.insert(cid, [{"role": "user", "content": text(i)}], actor="bench")
    sizes = [
        len(r.state) for r in store._storage.recorder.select_events(cid, limit=VISIBLE, desc=True)
    ]
    row_bytes = int(statistics.mean(sizes))
    row = os.urandom(row_bytes)
    raw = floor()
    raw.write([[row]] * VISIBLE)  # warmed up alike
    # The messages are made before timing: the raw floor's rows are made beforehand too.
    batches = [[{"role": "user", "content": text(i)}] for i in range(VISIBLE, VISIBLE + n)]
    times: list[float] = []
    raw_seconds = 0.0
    clock = RecorderClock(store)
    try:
        for start in range(0, n, block):
            for batch in batches[start : start + block]:
                t = time.perf_counter()
                store.insert(cid, batch, actor="bench")
                times.append(time.perf_counter() - t)
            raw_seconds += raw.write([[row]] * len(batches[start : start + block]))
    finally:
        raw.close()
    return n / sum(times), n / raw_seconds, times, row_bytes, clock.seconds


def warmed(store: ContextStore) -> uuid.UUID:
    """A new context holding VISIBLE messages, as appends() warms its own."""
    cid = store.create(actor="bench")
    for i in range(VISIBLE):
        store.insert(cid, [{"role": "user", "content": text(i)}], actor="bench")
    return cid


def append_to(store: ContextStore, cid: uuid.UUID, i: int) -> None:
    store.insert(cid, [{"role": "user", "content": text(VISIBLE + i)}], actor="bench")


def build(store: ContextStore, events: int, *, open_batches: int = 0) -> uuid.UUID:
    """A context with VISIBLE messages and `events` events (replaces after the inserts).

    Saved in chunks of the snapshot interval to build quickly; snapshots land where the
    store's own policy would put them.
    """
    cid = store.create(actor="bench")
    ctx = store._storage.get(cid)
    counter = store.tokenizers.counter(ctx.encoding)
    for i in range(VISIBLE):
        ctx.insert([{"role": "user", "content": text(i)}], actor="bench", counter=counter)
    for _ in range(open_batches):
        ctx.batch_start(actor="bench")
    n = 0
    while ctx.version < events:
        for _ in range(min(INTERVAL - ctx.version % INTERVAL, events - ctx.version)):
            n += 1
            ctx.replace(
                n % VISIBLE, {"role": "user", "content": text(n)}, actor="bench", counter=counter
            )
        store._writer.store_pending(ctx)  # chained, then the snapshot policy
    assert ctx.version == events and len(ctx.order) == VISIBLE
    store._core.cache.drop(cid)
    return cid


def cold_head(store: ContextStore, cid: uuid.UUID) -> None:
    store._core.cache.drop(cid)  # as a fresh process would: snapshot + later events
    store.visible(cid)


def bench_backend(label: str, url: str, floor: Callable[[], Floor], n: int, target: float) -> None:
    """`target`: the append's ratio to the raw floor aimed at on this backend."""
    print(f"\n== {label}  ({url.split('?')[0]})")
    with ContextStore.from_url(url, Settings(snapshot_interval=INTERVAL, actor="bench")) as store:
        rate, raw_rate, append_times, row_bytes, in_recorder = appends(store, n, floor)
        print(
            f"append: ctxstore {rate:,.0f}/s, raw single-row transactions {raw_rate:,.0f}/s "
            f"(rows of {row_bytes} B; alternating in blocks of 100) -> ratio "
            f"{rate / raw_rate:.2f}x (target >= {target}x)"
        )
        per_append, per_row = 1 / rate, 1 / raw_rate
        transaction = in_recorder / n
        print(
            f"append parts: {per_append * 1e6:.0f} us = the recorder's transaction "
            f"{transaction * 1e6:.0f} us (the floor's whole row: {per_row * 1e6:.0f} us) + "
            f"the Python work around it {(per_append - transaction) * 1e6:.0f} us; with no "
            f"Python work at all the ratio would be {per_row / transaction:.2f}x, and "
            f"{target}x leaves the Python work "
            f"{max(0.0, per_row / target - transaction) * 1e6:.0f} us"
        )
        cuts = statistics.quantiles(append_times, n=100)
        print(
            f"append latency: median {cuts[49] * 1e3:.2f} ms, p99 {cuts[98] * 1e3:.2f} ms, "
            f"max {max(append_times) * 1e3:.2f} ms (the tail: appends that snapshot the context, "
            f"which grows to {VISIBLE + n:,} messages, and the machine's own stalls)"
        )

        print(report(*measure(store, partial(append_to, store, warmed(store)), n // 2)))

        small = build(store, 100)
        large = build(store, HISTORY)
        # Cold reads over one snapshot interval of further events, alternating the two
        # contexts, so each distance from the last snapshot counts once for both.
        cold_small: list[float] = []
        cold_large: list[float] = []
        for step in range(INTERVAL):
            cold_small += timed(partial(cold_head, store, small), 3)
            cold_large += timed(partial(cold_head, store, large), 3)
            for cid in (small, large):
                store.replace(cid, step % VISIBLE, {"role": "user", "content": text(step)})
        cold_s, cold_l = med(cold_small), med(cold_large)
        warm_s = med(timed(lambda: store.visible(small), 100))
        warm_l = med(timed(lambda: store.visible(large), 100))
        print(
            f"head read, {VISIBLE} visible: ~100 events {cold_s * 1e3:.2f} ms, "
            f"~{HISTORY:,} events {cold_l * 1e3:.2f} ms -> ratio {cold_l / cold_s:.2f}x cold "
            f"(target <= 1.5x); cached {warm_s * 1e3:.2f} vs {warm_l * 1e3:.2f} ms -> "
            f"{warm_l / warm_s:.2f}x"
        )

        rng = random.Random(7)
        versions = [rng.randint(2, HISTORY - 1) for _ in range(30)]
        travel = [
            t for v in versions for t in timed(partial(store.visible, large, at_version=v), 1)
        ]
        print(
            f"time travel to random past versions of the {HISTORY:,}-event context: "
            f"{med(travel) * 1e3:.2f} ms -> {med(travel) / cold_l:.2f}x the head read (target <= 2x)"
        )

        # Nested batches all opened before the 10,000 events: each batch_end(to=k-1) rolls
        # back to a batch opened at least 10,000 events earlier.
        rollbacks = []
        depth = 9
        cid = build(store, HISTORY, open_batches=depth)
        store.visible(cid)  # loaded, as a context in use is
        for k in range(depth, 0, -1):
            t = time.perf_counter()
            w = store.batch_end(cid, to=k - 1, actor="bench")
            rollbacks.append(time.perf_counter() - t)
            assert w.batch == k - 1 and len(store.visible(cid).messages) == VISIBLE
        append_med = med(append_times)
        print(
            f"rollback to a batch opened {HISTORY:,} events earlier: {med(rollbacks) * 1e3:.2f} ms "
            f"vs append {append_med * 1e3:.2f} ms -> {med(rollbacks) / append_med:.2f}x (target <= 2x)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--pg",
        default=os.environ.get(
            "CTXSTORE_TEST_DSN",
            "host=127.0.0.1 port=5432 user=postgres dbname=postgres connect_timeout=3",
        ),
    )
    parser.add_argument("--appends", type=int, default=2000)
    parser.add_argument("--skip-pg", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bench_backend(
            "SQLite",
            f"sqlite:///{Path(tmp) / 'bench.db'}",
            lambda: RawSQLite(Path(tmp) / "raw.db"),
            args.appends,
            target=0.35,
        )
    if args.skip_pg:
        return
    try:
        with psycopg.connect(args.pg, autocommit=True) as conn:
            db = f"ctxstore_bench_{uuid.uuid4().hex[:8]}"
            conn.execute(f'CREATE DATABASE "{db}"')
    except psycopg.Error as exc:
        print(f"\nPostgreSQL skipped: {exc}")
        return
    info = psycopg.conninfo.conninfo_to_dict(args.pg)
    info["dbname"] = db
    dsn = psycopg.conninfo.make_conninfo("", **info)
    url = f"postgresql://{info.get('user', 'postgres')}@{info.get('host', '127.0.0.1')}:{info.get('port', 5432)}/{db}"
    try:
        bench_backend("PostgreSQL", url, lambda: RawPostgres(dsn), args.appends // 2, target=0.6)
    finally:
        with psycopg.connect(args.pg, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


if __name__ == "__main__":
    main()
