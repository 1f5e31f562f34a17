"""HTTP service benchmark: appends over loopback against the same appends in-process.

Several concurrent writers each append single messages to their own context, first through
the Python facade in this process (threads sharing one store), then through `ctxstore serve`
running in its own process, driven by client processes: a minimal keep-alive HTTP/1.1 client
(the cost an SDK in a compiled language pays; with and without an idempotency key on every
POST) and the typed Python client (httpx). Prints appends/s, the ratio to in-process,
latency percentiles and the CPU each append cost in the service and in the clients,
measured in one run.

Usage: python bench/bench_http.py [--clients 4] [--appends 300] [--workers 1] [--pg URL]
                                  [--skip-pg] [--sqlite]
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing as mp
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import httpx
import psycopg

from ctxstore.adapters.http.client import CtxStoreClient
from ctxstore.adapters.store.facade import ContextStore

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/postgres"
TOKEN = "bench-token"


def message(i: int) -> dict[str, str]:
    return {"role": "user", "content": f"turn {i}: " + "please check the weather tool output " * 4}


def percentiles(latencies: list[float]) -> tuple[float, float, float]:
    ordered = sorted(latencies)
    q = statistics.quantiles(ordered, n=100)
    return statistics.median(ordered) * 1e3, q[94] * 1e3, q[98] * 1e3


class Run(NamedTuple):
    rate: float  # appends/s
    latencies: list[float]  # seconds, one per append
    server_cpu: float  # CPU seconds per append in the service (or the in-process store)
    client_cpu: float  # CPU seconds per append in the clients


def cpu_seconds(pid: int) -> float:
    """User + system CPU a process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def in_process(url: str, clients: int, appends: int) -> Run:
    with ContextStore.from_url(url) as store:
        contexts = [store.create(name=f"bench-inproc-{n}") for n in range(clients)]
        store.insert(contexts[0], message(-1))  # tokenizer loaded before timing
        latencies: list[list[float]] = [[] for _ in range(clients)]
        start = threading.Barrier(clients + 1)

        def writer(n: int) -> None:
            start.wait()
            for i in range(appends):
                t = time.perf_counter()
                store.insert(contexts[n], message(i))
                latencies[n].append(time.perf_counter() - t)

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(clients)]
        for t in threads:
            t.start()
        start.wait()
        began, cpu = time.perf_counter(), time.process_time()
        for t in threads:
            t.join()
        elapsed, cpu = time.perf_counter() - began, time.process_time() - cpu
    total = clients * appends
    return Run(total / elapsed, [x for xs in latencies for x in xs], cpu / total, 0.0)


def http_writer(args: tuple[str, int, int, float, bool, bool]) -> list[float]:
    """One client process: [its CPU seconds, then each append's latency]."""
    base, n, appends, start_at, keys, typed = args
    append = typed_appender(base, n, keys) if typed else lean_appender(base, n, keys)
    append(-1)  # the context exists and the connection is warm
    while time.time() < start_at:
        time.sleep(0.001)
    out = []
    cpu = time.process_time()
    for i in range(appends):
        t = time.perf_counter()
        append(i)
        out.append(time.perf_counter() - t)
    return [time.process_time() - cpu, *out]


def typed_appender(base: str, n: int, keys: bool) -> Callable[[int], object]:
    """The typed httpx client, as a Python SDK would use it."""
    client = CtxStoreClient(base, token=TOKEN, idempotency_keys=keys)
    cid = client.create(name=f"bench-http-{n}")
    return lambda i: client.insert(cid, message(i))


def lean_appender(base: str, n: int, keys: bool) -> Callable[[int], object]:
    """A minimal HTTP/1.1 keep-alive client: the cost an SDK in a compiled language pays."""
    host, port = base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port))
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}

    def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        sent = {**headers, "Idempotency-Key": uuid.uuid4().hex} if keys else headers
        conn.request("POST", path, json.dumps(body), sent)
        response = conn.getresponse()
        data = response.read()
        if response.status >= 300:
            raise RuntimeError(f"{response.status}: {data[:200]!r}")
        result: dict[str, Any] = json.loads(data)
        return result

    cid = post("/v1/contexts", {"name": f"bench-lean-{n}"})["context_id"]
    return lambda i: post(f"/v1/contexts/{cid}/insert", {"messages": [message(i)]})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def over_http(url: str, clients: int, appends: int, keys: bool, workers: int, typed: bool) -> Run:
    port = free_port()
    env = {**os.environ, "CTXSTORE_URL": url, "CTXSTORE_SERVICE__TOKENS": f'{{"{TOKEN}": "b"}}'}
    command = [
        sys.executable, "-c", "from ctxstore.adapters.cli.app import main; main()", "serve",
        "--port", str(port), "--log-level", "warning", "--workers", str(workers),
    ]  # fmt: skip
    server = subprocess.Popen(command, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"{base}/health", timeout=1).raise_for_status()
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("the service did not start") from None
                time.sleep(0.1)
        pids = [server.pid, *(int(p) for p in _children(server.pid))]
        start_at = time.time() + 2.0
        jobs = [(base, n, appends, start_at, keys, typed) for n in range(clients)]
        with mp.get_context("spawn").Pool(clients) as pool:
            pending = pool.map_async(http_writer, jobs)
            while time.time() < start_at:
                time.sleep(0.001)
            cpu = sum(cpu_seconds(p) for p in pids)
            results = pending.get()
            elapsed = time.time() - start_at
            cpu = sum(cpu_seconds(p) for p in pids) - cpu
    finally:
        server.terminate()
        server.wait(timeout=20)
    total = clients * appends
    latencies = [x for r in results for x in r[1:]]
    return Run(total / elapsed, latencies, cpu / total, sum(r[0] for r in results) / total)


def _children(pid: int) -> list[str]:
    found = Path(f"/proc/{pid}/task/{pid}/children")
    return found.read_text().split() if found.exists() else []


def report(name: str, url: str, clients: int, appends: int, workers: int) -> None:
    local = in_process(url, clients, appends)
    single = in_process(url, 1, appends * 2)
    runs = [
        (f"in-process, {clients} threads", local),
        ("in-process, 1 thread", single),
        ("HTTP, keys", over_http(url, clients, appends, True, workers, typed=False)),
        ("HTTP, no keys", over_http(url, clients, appends, False, workers, typed=False)),
        ("HTTP, keys, httpx client", over_http(url, clients, appends, True, workers, typed=True)),
    ]
    print(f"\n{name}: {clients} concurrent writers x {appends} appends, one context each")
    print(
        f"  {'':26} {'appends/s':>9} {'ratio':>6} {'vs 1 thr':>8}  {'p50':>6} {'p95':>6}"
        f" {'p99 ms':>7}   CPU ms/append: service clients"
    )
    for label, run in runs:
        p50, p95, p99 = percentiles(run.latencies)
        print(
            f"  {label:26} {run.rate:9.0f} {run.rate / local.rate:5.2f}x "
            f"{run.rate / single.rate:7.2f}x  {p50:6.2f} {p95:6.2f} {p99:7.2f}"
            f"   {run.server_cpu * 1e3:21.2f} {run.client_cpu * 1e3:7.2f}"
        )
    print(
        f"  target: HTTP >= 0.70x in-process on PostgreSQL ({workers} service worker(s); "
        "ratio: against the same number of in-process threads)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--appends", type=int, default=300)
    parser.add_argument("--workers", type=int, default=1, help="service worker processes")
    parser.add_argument("--pg", default=os.environ.get("CTXSTORE_BENCH_PG", DEFAULT_PG))
    parser.add_argument("--skip-pg", action="store_true")
    parser.add_argument("--sqlite", action="store_true", help="also run on an SQLite file")
    args = parser.parse_args()
    print(f"cpus: {os.cpu_count()}  python {sys.version.split()[0]}")
    if not args.skip_pg:
        dbname = f"ctxstore_bench_http_{os.getpid()}"
        admin = args.pg
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{dbname}"')
        try:
            url = admin.rsplit("/", 1)[0] + f"/{dbname}"
            report("PostgreSQL", url, args.clients, args.appends, args.workers)
        finally:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE "{dbname}" WITH (FORCE)')
    if args.sqlite or args.skip_pg:
        with tempfile.TemporaryDirectory() as tmp:
            sqlite = f"sqlite:///{Path(tmp) / 'bench.db'}"
            report("SQLite", sqlite, args.clients, args.appends, args.workers)


if __name__ == "__main__":
    main()
