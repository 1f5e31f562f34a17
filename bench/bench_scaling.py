"""Appends/s with N concurrent writer processes, on one SQLite file and one PostgreSQL server.

    python bench/bench_scaling.py [--writers 1,2,4,8] [--appends 300] [--pg URL] [--skip-pg]

Each writer is a process with its own store; "own contexts" gives each its own context (the
usual case: one conversation per agent), "one context" makes them all append to the same one
(the worst case: every append races). docs/how-to/scaling.md reads the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scratch_pg import scratch_databases

from ctxstore.adapters.store.facade import ContextStore

WORKERS = str(Path(__file__).with_name("workers.py"))
DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/postgres"


def rate(url: str, writers: int, appends: int, shared: bool) -> tuple[float, int]:
    """Total appends/s of `writers` processes appending at once, and how many appends gave
    up after every retry (a typed VersionConflictError, nothing written)."""
    target = "new"
    if shared:
        with ContextStore.from_url(url) as store:
            target = str(store.create(name="shared"))
    start_at = time.time() + 3.0 + 0.3 * writers  # every process open and warm first
    procs = [
        subprocess.Popen(
            [sys.executable, WORKERS, "appends", url, target, str(appends), str(start_at)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for _ in range(writers)
    ]  # fmt: skip
    results = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-2000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    for r in results:
        for reason, times in r["why"].items():
            print(f"    refused {times}x: {reason}")
    slowest = max(r["seconds"] for r in results)  # all started together: the span of the run
    return sum(r["count"] for r in results) / slowest, sum(r["gave_up"] for r in results)


def report(label: str, make_url: object, counts: list[int], appends: int) -> None:
    assert callable(make_url)
    print(f"\n{label}: appends/s with N writer processes ({appends} appends each)")
    print(f"  {'writers':>8} {'own contexts':>14} {'one context':>13}   gave up (one context)")
    for n in counts:
        own, _ = rate(make_url(), n, appends, shared=False)
        one, refused = rate(make_url(), n, appends, shared=True)
        print(f"  {n:>8} {own:>14.0f} {one:>13.0f}   {refused}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writers", default="1,2,4,8")
    parser.add_argument("--appends", type=int, default=300)
    parser.add_argument("--pg", default=os.environ.get("CTXSTORE_BENCH_PG", DEFAULT_PG))
    parser.add_argument("--skip-pg", action="store_true")
    parser.add_argument("--skip-sqlite", action="store_true")
    args = parser.parse_args()
    counts = [int(n) for n in args.writers.split(",")]
    print(f"cpus: {os.cpu_count()}")
    with tempfile.TemporaryDirectory() as tmp:
        made = iter(range(10**6))
        if not args.skip_sqlite:
            report("SQLite (one file, WAL)",
                   lambda: f"sqlite:///{Path(tmp) / f'scale{next(made)}.db'}", counts, args.appends)  # fmt: skip
    if args.skip_pg:
        return
    with scratch_databases(args.pg) as fresh:
        report("PostgreSQL (one server)", fresh, counts, args.appends)


if __name__ == "__main__":
    main()
