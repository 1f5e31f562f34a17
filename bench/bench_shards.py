"""Contexts over three PostgreSQL servers against one, in one sitting, all on this machine.

    python bench/bench_shards.py [--writers 8] [--appends 300] [--contexts 3000]

Starts three private servers (bench/pg_cluster.py; fsync off on each, as on the one server
compared with). Placement: `contexts` contexts created through the sharded store, counted
per server. Appends: `writers` processes on their own contexts, first against one private
server, then against the sharded store over three; CPU per append of the writers and of
every PostgreSQL process (utime+stime, with ended backends through the postmasters).
"""

from __future__ import annotations

import argparse
import os

from bench_pg_appends import postgres_cpu
from bench_scaling import rate
from pg_cluster import private_cluster

from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.shards.store import ShardedStore


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--appends", type=int, default=300)
    parser.add_argument("--contexts", type=int, default=3000)
    args = parser.parse_args()
    print(f"cpus: {os.cpu_count()}")
    with private_cluster() as a, private_cluster() as b, private_cluster() as c:
        urls = [a.url, b.url, c.url]
        with ShardedStore.from_urls(urls, Settings(actor="bench")) as sharded:
            for i in range(args.contexts):
                sharded.create(name=f"c{i}")
            counts = sharded.directory.counts()
        third = args.contexts / 3
        print(f"placement of {args.contexts} contexts: "
              + ", ".join(f"{n} {k} ({100 * (k - third) / third:+.1f}%)" for n, k in counts.items()))  # fmt: skip
        print(f"\n{args.writers} writers on their own contexts, {args.appends} appends each")
        for label, url in (("one server", a.url), ("three servers", "shards:" + ",".join(urls))):
            cpu = postgres_cpu()
            per_second, gave_up = rate(url, args.writers, args.appends, shared=False)
            spent = postgres_cpu() - cpu
            total = args.writers * args.appends
            print(f"  {label:<14} {per_second:>7.0f} appends/s  gave up {gave_up}  "
                  f"PostgreSQL CPU {1000 * spent / total:.2f} ms/append (whole run)")  # fmt: skip


if __name__ == "__main__":
    main()
