"""Reads on a streaming replica against the same reads on its primary, in one sitting.

    python bench/bench_replicas.py [--contexts 200] [--events 100] [--reads 300]

Starts a private primary and a hot standby (bench/pg_cluster.py: pg_basebackup -R, their
own ports, fsync off on both), writes `contexts` contexts of `events` appends, waits for
the standby to replay them, then times three reads through a store opened on the primary
alone and through one opened with the replica: an audit page (100 rows of one context), a
context's history, and its head (`visible`). A third store reads its own writes: each
read follows one append, so the replica is checked (and, when behind, passed over).
"""

from __future__ import annotations

import argparse
import functools
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

import psycopg
from pg_cluster import private_cluster, private_folder

from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore


def replayed(primary: Any, standby: Any) -> None:
    with psycopg.connect(primary.url, autocommit=True) as p:
        lsn = p.execute("SELECT pg_current_wal_lsn()").fetchone()[0]  # type: ignore[index]
    with psycopg.connect(standby.url, autocommit=True) as s:
        while not s.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,)).fetchone()[0]:  # type: ignore[index]
            time.sleep(0.01)


def timed(read: Callable[[Any], object], ids: list[Any], reads: int) -> float:
    """Median milliseconds of `read(id)` over random contexts."""
    rng = random.Random(7)
    took = []
    for _ in range(reads):
        cid = rng.choice(ids)
        started = time.perf_counter()
        read(cid)
        took.append(1000 * (time.perf_counter() - started))
    return statistics.median(took)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contexts", type=int, default=200)
    parser.add_argument("--events", type=int, default=100)
    parser.add_argument("--reads", type=int, default=300)
    args = parser.parse_args()
    settings = Settings(actor="bench")
    with private_cluster() as primary:
        standby = primary.base_backup(private_folder(), standby=True)
        standby.start()
        try:
            with ContextStore.from_url(primary.url, settings) as writer:
                ids = []
                for c in range(args.contexts):
                    cid = writer.create(name=f"c{c}")
                    for n in range(args.events):
                        writer.insert(cid, [{"role": "user", "content": f"turn {n} " * 20}])
                    ids.append(cid)
                writer.admin.refresh_audit_index()
            replayed(primary, standby)
            reads: dict[str, Callable[[ContextStore, Any], object]] = {
                "audit page (100 rows)": lambda s, c: s.audit(context_id=c, limit=100),
                "history": lambda s, c: s.history(c),
                "head (visible)": lambda s, c: s.visible(c),
            }
            with (
                ContextStore.from_url(primary.url, settings, replicas=[]) as on_primary,
                ContextStore.from_url(primary.url, settings, replicas=[standby.url]) as on_replica,
            ):
                print(f"{args.contexts} contexts x {args.events} appends; median of "
                      f"{args.reads} reads, ms")  # fmt: skip
                print(f"  {'read':<24} {'primary':>8} {'replica':>8} {'ratio':>7}")
                for name, read in reads.items():
                    for store in (on_primary, on_replica):  # warm both caches alike
                        timed(functools.partial(read, store), ids, 20)
                    p = timed(functools.partial(read, on_primary), ids, args.reads)
                    r = timed(functools.partial(read, on_replica), ids, args.reads)
                    print(f"  {name:<24} {p:>8.2f} {r:>8.2f} {r / p:>6.2f}x")
                served = on_replica._replicas.served if on_replica._replicas else {}
                print(f"  reads answered: {served}")
            with ContextStore.from_url(primary.url, settings, replicas=[standby.url]) as own:
                served_before = dict(own._replicas.served) if own._replicas else {}
                took = []
                for cid in ids[:50]:
                    own.insert(cid, [{"role": "user", "content": "mine"}])
                    started = time.perf_counter()
                    assert own.history(cid)[-1].version == args.events + 2
                    took.append(1000 * (time.perf_counter() - started))
                served = own._replicas.served if own._replicas else {}
                print(f"  history right after its own append: {statistics.median(took):.2f} ms "
                      f"median; replica {served['replica'] - served_before.get('replica', 0)}, "
                      f"primary {served['primary'] - served_before.get('primary', 0)} of 50")  # fmt: skip
        finally:
            standby.stop()


if __name__ == "__main__":
    main()
