"""Group commit on SQLite: W writer threads of one process appending to contexts of their
own, with appends queued meanwhile sharing a transaction (the default) and with each append
in a transaction of its own (as before group commit). Prints appends/s of each, their ratio,
and how many appends a commit held.

    python bench/bench_group_commit.py [--writers 8] [--appends 300]
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore


class Alone:
    """Each append in its own transaction on the writer connection (no grouping)."""

    def __init__(self, recorder: Any) -> None:
        self.recorder = recorder
        self.commits = self.appends = 0

    def append(self, events: Sequence[Any]) -> Any:
        pool = self.recorder.datastore.pool
        conn = pool.get_connection(is_writer=True)
        try:
            self.commits += 1
            self.appends += 1
            return self.recorder.insert_events_with(conn, events)
        finally:
            pool.put_connection(conn)


def run(folder: Path, writers: int, appends: int, grouped: bool) -> tuple[float, float]:
    """(appends/s, appends per commit)."""
    url = f"sqlite:///{folder / ('grouped.db' if grouped else 'alone.db')}"
    with ContextStore.from_url(url, Settings(actor="bench")) as store:
        recorder: Any = store._storage.recorder
        if not grouped:
            recorder.__dict__["group"] = Alone(recorder)
        group = recorder.group
        cids = [store.create(name=f"w{i}") for i in range(writers)]
        for cid in cids:  # warm up
            store.insert(cid, {"role": "user", "content": "warm"})
        commits, done = group.commits, group.appends
        start = threading.Barrier(writers + 1)

        def write(cid: Any) -> None:
            start.wait()
            for n in range(appends):
                store.insert(cid, {"role": "user", "content": f"message {n} " * 10})

        threads = [threading.Thread(target=write, args=(c,)) for c in cids]
        for t in threads:
            t.start()
        start.wait()
        t0 = time.perf_counter()
        for t in threads:
            t.join()
        seconds = time.perf_counter() - t0
        per_commit = (group.appends - done) / max(group.commits - commits, 1)
        return writers * appends / seconds, per_commit


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--appends", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        # Alternating, twice each, so a drift of this shared machine's speed falls on both.
        results: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
        for grouped in (False, True, False, True):
            results[grouped].append(run(Path(tmp), args.writers, args.appends, grouped))
    alone = max(r for r, _ in results[False])
    grouped_rate = max(r for r, _ in results[True])
    per_commit = max(p for _, p in results[True])
    print(f"{args.writers} writers, {args.appends} appends each, SQLite:")
    print(f"  each append its own transaction: {alone:,.0f} appends/s")
    print(f"  group commit:                    {grouped_rate:,.0f} appends/s "
          f"({per_commit:.1f} appends a commit)")  # fmt: skip
    print(f"  -> {grouped_rate / alone:.2f}x")
    one_alone = run(Path(tempfile.mkdtemp()), 1, args.appends * 2, False)[0]
    one_grouped = run(Path(tempfile.mkdtemp()), 1, args.appends * 2, True)[0]
    print(f"one writer: {one_alone:,.0f} alone vs {one_grouped:,.0f} grouped appends/s "
          f"-> {one_grouped / one_alone:.2f}x (a lone writer pays the queue's cost only)")  # fmt: skip


if __name__ == "__main__":
    main()
