"""PostgreSQL appends by writers on their own contexts: the lock-free path against the
table-locked one it replaced and against a raw floor, in one sitting.

    python bench/bench_pg_appends.py [--writers 8] [--appends 400] [--pg URL]

Three runs, each with N writer processes started together:
- raw floor: plain psycopg inserts of rows like an append's event row (one per transaction,
  a table shaped like the events table, no store);
- locked: ctxstore as before migration 9, the insert function taking the events table's
  EXCLUSIVE lock (re-created so by this benchmark in its own scratch database);
- lock-free: ctxstore as it is.

While each runs, pg_stat_activity is sampled every 10 ms: the share of writer-backend
samples waiting on a lock (wait_event_type = 'Lock'), and on anything else. CPU per append
is the writers' process time, and the PostgreSQL server's (every postgres process's
utime+stime from /proc) over the same span.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
from scratch_pg import scratch_databases

from ctxstore.adapters.store.facade import ContextStore

WORKERS = str(Path(__file__).with_name("workers.py"))
DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/postgres"
TICKS = os.sysconf("SC_CLK_TCK")


def postgres_cpu() -> float:
    """CPU seconds used so far by every process named postgres on this machine, with the
    backends that ended (counted in the postmaster's children's time)."""
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        if name.startswith("postgres"):
            fields = stat[stat.rindex(")") + 2 :].split()
            # utime, stime; and cutime, cstime: the postmaster's holds its ended backends'
            total += sum(int(f) for f in fields[11:15])
    return total / TICKS


class Sampler(threading.Thread):
    """Samples the writers' backends (application_name 'bench') every 10 ms."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.stop = threading.Event()
        self.samples: Counter[str] = Counter()
        self.locks: Counter[str] = Counter()

    def run(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self.stop.is_set():
                for kind, event in conn.execute(
                    "SELECT wait_event_type, wait_event FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                    "AND backend_type = 'client backend' AND state = 'active'"
                ).fetchall():
                    what = "running" if kind is None else kind
                    self.samples[what] += 1
                    if kind == "Lock":
                        self.locks[event] += 1
                time.sleep(0.01)

    def shares(self) -> str:
        n = sum(self.samples.values()) or 1
        parts = [f"{k} {100 * v / n:.1f}%" for k, v in self.samples.most_common()]
        locks = ", ".join(f"{k}: {v}" for k, v in self.locks.most_common())
        return "; ".join(parts) + (f" (locks: {locks})" if locks else "")


def commits(url: str) -> int:
    """Transactions committed in the database so far (the statistics lag ~0.5 s)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_force_next_flush()")
        row = conn.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
        return int(row[0]) if row else 0


def lock_the_table(url: str) -> None:
    """Re-create the insert function with the library's EXCLUSIVE table lock and its
    NOTIFY: the path before migration 9."""
    with psycopg.connect(url, autocommit=True) as conn:
        body = conn.execute(
            "SELECT pg_get_functiondef(p.oid) FROM pg_proc p JOIN pg_namespace n "
            "ON n.oid = p.pronamespace WHERE n.nspname = 'public' AND proname LIKE '%insert%'"
        ).fetchone()
        assert body, "no insert function"
        locked = body[0].replace(
            "RETURN QUERY",
            "LOCK TABLE public.ctxstore_events IN EXCLUSIVE MODE; NOTIFY ctxstore; RETURN QUERY",
            1,
        )
        assert locked != body[0]
        conn.execute(locked)


def run(url: str, writers: int, appends: int, mode: str, target: str) -> dict[str, Any]:
    start_at = time.time() + 3.0 + 0.3 * writers
    env = {**os.environ, "PGAPPNAME": "bench"}
    procs = [
        subprocess.Popen(
            [sys.executable, WORKERS, mode, url, target, str(appends), str(start_at)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )
        for _ in range(writers)
    ]  # fmt: skip
    while time.time() < start_at:
        time.sleep(0.01)
    sampler = Sampler(url)
    sampler.start()
    pg_before = postgres_cpu()
    commits_before = commits(url)
    results = []
    for p in procs:
        out, err = p.communicate(timeout=900)
        assert p.returncode == 0, err[-2000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    pg_cpu = postgres_cpu() - pg_before
    committed = commits(url) - commits_before
    sampler.stop.set()
    sampler.join()
    count = sum(r["count"] for r in results)
    span = max(r["seconds"] for r in results)
    return {
        "rate": count / span,
        "client_ms": 1000 * sum(r["cpu"] for r in results) / count,
        "server_ms": 1000 * pg_cpu / count,
        "gave_up": sum(r["gave_up"] for r in results),
        "commits": committed / count,
        "waits": sampler.shares(),
        "lock_share": sum(sampler.locks.values()) / (sum(sampler.samples.values()) or 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--appends", type=int, default=400)
    parser.add_argument("--pg", default=os.environ.get("CTXSTORE_BENCH_PG", DEFAULT_PG))
    args = parser.parse_args()
    n, count = args.writers, args.appends
    print(f"cpus: {os.cpu_count()}; {n} writers on their own contexts, {count} appends each")
    rows = {}
    with scratch_databases(args.pg) as fresh:
        raw = fresh()
        with psycopg.connect(raw, autocommit=True) as conn:
            conn.execute(
                "CREATE TABLE raw_events (originator_id uuid NOT NULL, originator_version "
                "bigint NOT NULL, topic text, state bytea, notification_id bigserial, "
                "PRIMARY KEY (originator_id, originator_version))"
            )
            conn.execute("CREATE UNIQUE INDEX ON raw_events (notification_id)")
        rows["raw floor"] = run(raw, n, count, "raw", "raw_events")
        locked = fresh()
        ContextStore.from_url(locked).close()
        lock_the_table(locked)
        rows["locked (before)"] = run(locked, n, count, "appends", "new")
        free = fresh()
        ContextStore.from_url(free).close()
        rows["lock-free"] = run(free, n, count, "appends", "new")
    floor = rows["raw floor"]["rate"]
    print(f"\n  {'path':<16} {'appends/s':>9} {'x floor':>8} {'client ms':>10} "
          f"{'server ms':>10} {'lock waits':>10} {'commits':>8}  gave up")  # fmt: skip
    for name, r in rows.items():
        print(f"  {name:<16} {r['rate']:>9.0f} {r['rate'] / floor:>7.2f}x {r['client_ms']:>10.2f} "
              f"{r['server_ms']:>10.2f} {100 * r['lock_share']:>9.1f}% {r['commits']:>8.2f}  "
              f"{r['gave_up']}")  # fmt: skip
    print("\nactive writer backends, by what they were doing when sampled:")
    for name, r in rows.items():
        print(f"  {name}: {r['waits']}")
    free_rate, locked_rate = rows["lock-free"]["rate"], rows["locked (before)"]["rate"]
    print(f"\nlock-free against locked: {free_rate / locked_rate:.2f}x")
    per = rows["lock-free"]["client_ms"] + rows["lock-free"]["server_ms"]
    cores = os.cpu_count() or 1
    print(f"CPU per append, lock-free: {rows['lock-free']['client_ms']:.2f} ms ctxstore + "
          f"{rows['lock-free']['server_ms']:.2f} ms PostgreSQL = {per:.2f} ms; "
          f"{cores} cores give at most {1000 * cores / per:.0f} appends/s")  # fmt: skip


if __name__ == "__main__":
    main()
