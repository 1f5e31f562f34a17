"""The soak's SQLite search-index corruption, alone: two writers (inserts, deletes, erasures,
searches) and the projections' worker on a SQLite file on a 16 MB tmpfs that is filled
now and then (SQLITE_FULL), processes SIGKILLed and started again with --kill. Every three
seconds FTS5's own 'integrity-check' runs on the search index; the first failure is printed
("database disk image is malformed", "vtable constructor failed: ctxstore_search_fts") and
the run stops. Needs root (the tmpfs).

    python bench/soak_fts_repro.py [--seconds 240] [--kill] [--no-fill]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import sqlite3
import subprocess
import tempfile
import time
from contextlib import suppress
from pathlib import Path
from typing import Any

FTS = "ctxstore_search_fts"


def opened(url: str) -> Any:
    """The store, opening retried while the disk is full."""
    from ctxstore.adapters.store.facade import ContextStore

    while True:
        with suppress(Exception):
            return ContextStore.from_url(url)
        time.sleep(0.2)


def writer(url: str, seconds: float, seed: int) -> None:
    store = opened(url)
    rng = random.Random(seed)
    contexts: list[str] = []
    deadline = time.time() + seconds
    while time.time() < deadline:
        with suppress(Exception):  # refusals are expected: the disk is full now and then
            if len(contexts) < 3:
                contexts.append(str(store.create(name="x")))
                continue
            cid, r = rng.choice(contexts), rng.random()
            if r < 0.7:
                text = f"hello w{rng.randrange(10**6)} " + "pad " * rng.randrange(50)
                store.insert(cid, [{"role": "user", "content": text}])
            elif r < 0.8 and (shown := store.visible(cid).messages):
                store.delete(cid, [str(shown[0].id)])
            elif r < 0.9:
                contexts.remove(cid)
                store.erase(cid, reason="repro")
            else:
                store.search("hello")


def worker(url: str, seconds: float, seed: int) -> None:
    store = opened(url)
    deadline = time.time() + seconds
    while time.time() < deadline:
        with suppress(Exception):
            store.admin.refresh_audit_index()
            store.admin.refresh_search_index()
        time.sleep(0.05)


def filler(folder: Path, seconds: float) -> None:
    deadline = time.time() + seconds
    while time.time() < deadline:
        time.sleep(random.uniform(0.5, 1.5))
        with suppress(OSError), (folder / "ballast").open("wb") as f:
            while True:
                f.write(b"\0" * (1 << 20))
                f.flush()
        time.sleep(random.uniform(0.2, 1.0))
        (folder / "ballast").unlink()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=240)
    parser.add_argument("--kill", action="store_true")
    parser.add_argument("--no-fill", action="store_true")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="ctxstore-fts-"))
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(folder)], check=True)
    try:
        run(folder, args.seconds, args.kill, not args.no_fill)
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def run(folder: Path, seconds: float, kill: bool, fill: bool) -> None:
    from ctxstore.adapters.store.facade import ContextStore

    url = f"sqlite:///{folder / 'repro.db'}"
    ContextStore.from_url(url).close()
    roles = [writer, writer, worker]
    procs = [multiprocessing.Process(target=r, args=(url, seconds, i)) for i, r in enumerate(roles)]
    if fill:
        procs.append(multiprocessing.Process(target=filler, args=(folder, seconds)))
    for p in procs:
        p.start()
    started = time.time()
    n = 0
    while time.time() - started < seconds:
        time.sleep(3)
        n += 1
        if kill and n % 2 == 0:
            i = random.randrange(len(roles))
            procs[i].kill()
            procs[i].join()
            left = max(seconds - (time.time() - started), 1.0)
            procs[i] = multiprocessing.Process(target=roles[i], args=(url, left, 10 + n))
            procs[i].start()
        try:
            with sqlite3.connect(folder / "repro.db", timeout=5) as c:
                c.execute(f"INSERT INTO {FTS} ({FTS}) VALUES ('integrity-check')")
        except sqlite3.OperationalError:
            continue  # locked, or full: not what is looked for
        except sqlite3.DatabaseError as exc:
            print(f"after {time.time() - started:.0f} s: the search index is corrupt: {exc}")
            break
    else:
        print(f"{seconds:g} s: the search index held")
    for p in procs:
        p.kill()
        p.join()
    print(f"SQLite {sqlite3.sqlite_version}; pid {os.getpid()}")


if __name__ == "__main__":
    main()
