"""Audit benchmark: an audit page over a large store, verify's rate, export then import.

Targets (issue 5): one actor's events of the last hour over 1,000,000 events, first page
under 50 ms on PostgreSQL; verify >= 100,000 events/s; export then import of a
10,000-event context under 2 s on SQLite. Prints figures and the plan PostgreSQL chose.
Usage: python bench/bench_audit.py [--events N] [--pg URL] [--skip-pg]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

from ctxstore.adapters.settings import Settings
from ctxstore.adapters.storage.audit_index import AuditFilter
from ctxstore.adapters.storage.codec.chain import GENESIS
from ctxstore.adapters.storage.postgres_audit import PostgresAuditView
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.domain.context import Context
from ctxstore.projections.audit import to_micros

ACTORS = 50
PER_CONTEXT = 500
SPAN = timedelta(days=30)  # the store's events are spread over the last 30 days


def message(n: int) -> dict[str, Any]:
    return {"role": "user" if n % 2 else "assistant", "content": f"turn {n}: " + "word " * 55}


def fill(store: ContextStore, events: int) -> None:
    """Write `events` events (contexts of PER_CONTEXT) with times spread over SPAN."""
    mapper = store._storage.mapper
    start = datetime.now(UTC) - SPAN
    step = SPAN / events
    written, n = 0, 0
    batch: list[Any] = []
    while written < events:
        ctx = Context.start(name=f"c{written}", metadata=None, actor="loader")
        for k in range(min(PER_CONTEXT, events - written) - 1):
            who = f"agent-{(written + k) % ACTORS}"
            if k % 50 == 10:
                ctx.batch_start(actor=who)
            elif k % 50 == 20:
                ctx.batch_end(actor=who)
            else:
                ctx.insert([message(k)], actor=who)
        pending = []
        for e in ctx.collect_events():
            state = dict(vars(e))
            state["timestamp"] = start + step * n
            n += 1
            clone = object.__new__(type(e))
            object.__setattr__(clone, "__dict__", state)
            pending.append(clone)
        sealed, _ = mapper.to_sealed_events(pending, GENESIS)
        batch += sealed
        written += len(pending)
        if len(batch) >= 20_000 or written >= events:
            store._storage.recorder.insert_events(batch)
            batch = []


def audit_figures(store: ContextStore, label: str) -> None:
    t = time.perf_counter()
    fill(store, ARGS.events)
    loaded = time.perf_counter() - t
    t = time.perf_counter()
    store.admin.refresh_audit_index()
    indexed = time.perf_counter() - t
    print(
        f"{label}: {ARGS.events:,} events written in {loaded:.1f} s, indexed in {indexed:.1f} s "
        f"({ARGS.events / indexed:,.0f} events/s)"
    )
    if isinstance(store._storage.audit_index, PostgresAuditView):
        with psycopg.connect(**_pg_kwargs(store), autocommit=True) as conn:
            conn.execute("ANALYZE ctxstore_audit")
    since = datetime.now(UTC) - timedelta(hours=1)
    first = time.perf_counter()
    page = store.audit(actor="agent-7", since=since, limit=100)
    first = time.perf_counter() - first
    times = []
    for _ in range(20):
        s = time.perf_counter()
        store.audit(actor="agent-7", since=since, limit=100)
        times.append(time.perf_counter() - s)
    print(
        f"{label}: one actor, last hour, first page ({len(page.entries)} events): "
        f"first {first * 1000:.1f} ms, median {statistics.median(times) * 1000:.1f} ms "
        f"(target < 50 ms on PostgreSQL)"
    )
    tail = store._storage.audit_index.position() - 50  # near the newest events
    s = time.perf_counter()
    store.audit(actor="agent-7", after=tail, limit=100)
    print(
        f"{label}: following one actor from position {tail}: "
        f"{(time.perf_counter() - s) * 1000:.1f} ms"
    )
    if isinstance(store._storage.audit_index, PostgresAuditView):
        plan = store._storage.audit_index.explain(
            AuditFilter(actor="agent-7", since=to_micros(since)), 0, 100
        )
        used = sorted(
            {w for w in plan.replace("(", " ").split() if w.startswith("ctxstore_audit_")}
        )
        print(
            f"{label}: PostgreSQL answers with index(es) {used}:\n    "
            + plan.replace("\n", "\n    ")
        )
    result = store.verify()
    print(
        f"{label}: verify {result.events:,} events in {result.seconds:.2f} s = "
        f"{result.events / result.seconds:,.0f} events/s (target >= 100,000); ok={result.ok}"
    )


def _pg_kwargs(store: ContextStore) -> dict[str, Any]:
    env = store._storage.env
    return {
        "dbname": env["POSTGRES_DBNAME"], "host": env["POSTGRES_HOST"],
        "port": env["POSTGRES_PORT"], "user": env["POSTGRES_USER"],
        "password": env.get("POSTGRES_PASSWORD") or None,
    }  # fmt: skip


def export_import(folder: Path) -> None:
    with ContextStore.from_url(f"sqlite:///{folder / 'src.db'}") as src:
        cid = src.create(name="long")
        for n in range(0, 9_999, 3):
            src.insert(cid, [message(n), message(n + 1), message(n + 2)])
        src.batch_start(cid)
        while src.visible(cid).version < 10_000:
            src.insert(cid, [message(1)])
        t = time.perf_counter()
        lines = list(src.export_events(cid))
        exported = time.perf_counter() - t
    with ContextStore.from_url(f"sqlite:///{folder / 'dst.db'}") as dst:
        t = time.perf_counter()
        dst.import_events(lines)
        imported = time.perf_counter() - t
        assert list(dst.export_events(cid)) == lines
    print(
        f"sqlite: export {len(lines):,} events {exported:.2f} s + import {imported:.2f} s = "
        f"{exported + imported:.2f} s (target < 2 s); round trip exact"
    )


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        export_import(Path(folder))
        with ContextStore.from_url(f"sqlite:///{Path(folder) / 'audit.db'}", Settings()) as s:
            audit_figures(s, "sqlite")
    if ARGS.skip_pg:
        return
    name = f"ctxstore_bench_{uuid.uuid4().hex[:8]}"
    admin = ARGS.pg
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        with ContextStore.from_url(f"postgresql://postgres@127.0.0.1:5432/{name}") as s:
            audit_figures(s, "postgresql")
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--pg", default="host=127.0.0.1 port=5432 user=postgres dbname=postgres")
    parser.add_argument("--skip-pg", action="store_true")
    ARGS = parser.parse_args()
    main()
