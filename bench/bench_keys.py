"""Keys per context (docs/explanation/security.md), each target a ratio or a rate measured in one run.

- appends: the same appends (round-robin over 200 contexts, two messages each) with a data
  key per context, against one key for the whole store (the layout stores were encrypted
  with before: same AES-GCM, the state sealed under the store's key), and without
  encryption. Target: per-context keys within 1.15x of one key.
- cold: opening a context no cache holds pays one vault read and one unwrap; the time of
  the first read of a cold context with and without encryption.
- rotation: 100,000 data keys re-wrapped under a new KEK (`rotate_kek`) while a writer keeps
  appending (each append timed). Target >= 5,000 contexts/s; the writer's p50/p99 during
  rotation against before it.

    python bench/bench_keys.py [--pg postgresql://postgres@127.0.0.1:5432/postgres]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from uuid import UUID

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from eventsourcing.cryptography import AESCipher
from pydantic import SecretStr
from scratch_pg import scratch_databases

from ctxstore.adapters.keys.cipher import ContextCipher, _wrap_aad
from ctxstore.adapters.keys.rotation import rotate_kek
from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore

TEXT = "a user's question about the quarterly figures, with some detail " * 6


class OneKeyCipher(ContextCipher):
    """The store-wide key: what encryption was before keys per context."""

    def __init__(self, key: bytes) -> None:
        self._one = AESGCM(key)

    def encrypt(self, owner: UUID | str, data: bytes) -> bytes:
        nonce = os.urandom(12)
        sealed = self._one.encrypt(nonce, data, None)
        return nonce + sealed[-16:] + sealed[:-16]

    def decrypt(self, owner: UUID | str, data: bytes) -> bytes:
        return self._one.decrypt(data[:12], data[28:] + data[12:28], None)


def appends(url: str, settings: Settings, one_key: bool, contexts: int, rounds: int) -> float:
    """Appends per second."""
    with ContextStore.from_url(url, settings) as store:
        if one_key:
            store._core.storage.mapper.keys = OneKeyCipher(AESGCM.generate_key(256))
        cids = [store.create(name=f"c{i}") for i in range(contexts)]
        start = time.perf_counter()
        for r in range(rounds):
            for cid in cids:
                store.insert(cid, [{"role": "user", "content": f"{TEXT} {r}"},
                                   {"role": "assistant", "content": f"{TEXT} answer"}])  # fmt: skip
        return contexts * rounds / (time.perf_counter() - start)


def bench_appends(make_url: Any, label: str, contexts: int, rounds: int) -> None:
    key = SecretStr(AESCipher.create_key(32))
    plain = Settings(actor="bench")
    keyed = Settings(actor="bench", encryption_key=key)
    found: dict[str, list[float]] = {"per-context": [], "one key": [], "none": []}
    for _ in range(3):  # interleaved: the machine's drift falls on all three alike
        found["per-context"].append(appends(make_url(), keyed, False, contexts, rounds))
        found["one key"].append(appends(make_url(), keyed, True, contexts, rounds))
        found["none"].append(appends(make_url(), plain, False, contexts, rounds))
    best = {k: max(v) for k, v in found.items()}
    print(f"{label} appends/s (best of 3): " + ", ".join(f"{k} {v:,.0f}" for k, v in best.items()))
    print(f"{label}   per-context keys / one key: time {best['one key'] / best['per-context']:.3f}x"
          f" (target <= 1.15x); / no encryption: {best['none'] / best['per-context']:.3f}x")  # fmt: skip


def bench_cold(url: Any, label: str) -> None:
    key = SecretStr(AESCipher.create_key(32))
    times: dict[str, list[float]] = {"keyed": [], "plain": []}
    for name, settings in (("keyed", Settings(encryption_key=key)), ("plain", Settings())):
        u = url(name)
        with ContextStore.from_url(u, settings) as store:
            cids = [store.create(name="c") for _ in range(50)]
            for cid in cids:
                store.insert(cid, [{"role": "user", "content": TEXT}])
        with ContextStore.from_url(u, settings) as store:  # nothing cached: each read is cold
            vault = store._core.storage.keys
            reads = 0
            if vault is not None:
                inner = vault.keys.vault
                original = inner.rows

                def counted(name: str, _o: Any = original) -> Any:
                    nonlocal reads
                    reads += 1
                    return _o(name)

                inner.rows = counted  # type: ignore[method-assign]
            for cid in cids:
                t = time.perf_counter()
                store.visible(cid)
                times[name].append(time.perf_counter() - t)
            if vault is not None:
                print(
                    f"{label} cold reads of 50 contexts: {reads} vault reads ({reads / 50:.0f} each)"
                )
    k, p = statistics.median(times["keyed"]), statistics.median(times["plain"])
    print(f"{label} first read of a cold context: {k * 1000:.2f} ms keyed, {p * 1000:.2f} ms "
          f"plain ({k / p:.2f}x)")  # fmt: skip


def fill_vault(store: ContextStore, n: int) -> None:
    """`n` wrapped data keys, as `n` contexts would leave (written in bulk: the bench times
    rotation, not creation)."""
    keys = store._core.storage.keys.keys  # type: ignore[union-attr]
    rows = []
    for i in range(n):
        name = f"{i:032x}"
        kek, wrapped = keys.kek.wrap(AESGCM.generate_key(256), _wrap_aad(name, 1))
        rows.append((name, 1, kek, wrapped, time.time()))
    vault: Any = keys.vault
    if hasattr(vault, "path"):
        with sqlite3.connect(vault.path) as db:
            db.executemany("INSERT INTO ctxstore_keys VALUES (?, ?, ?, ?, ?)", rows)
    else:
        with vault._connect() as c:
            c.cursor().executemany(f"INSERT INTO {vault.table} VALUES (%s, %s, %s, %s, %s)", rows)


def bench_rotation(url: str, label: str, n: int, folder: Path) -> None:
    k1, k2 = AESCipher.create_key(32), AESCipher.create_key(32)
    (folder / "k1").write_text(k1 + "\n")
    (folder / "k21").write_text(k2 + "\n" + k1 + "\n")
    with ContextStore.from_url(url, Settings(key_file=folder / "k1")) as store:
        fill_vault(store, n)
        cids = [store.create(name="w") for _ in range(20)]
    settings = Settings(key_file=folder / "k21")
    with ContextStore.from_url(url, settings) as store, ContextStore.from_url(url, settings) as w:
        latencies: dict[str, list[float]] = {"before": [], "during": []}
        phase = ["before"]
        stop = threading.Event()

        def writer() -> None:
            i = 0
            while not stop.is_set():
                cid = cids[i % len(cids)] if i % 10 else w.create(name="new")  # some new ones
                t = time.perf_counter()
                w.insert(cid, [{"role": "user", "content": TEXT}])
                latencies[phase[0]].append(time.perf_counter() - t)
                i += 1

        thread = threading.Thread(target=writer)
        thread.start()
        time.sleep(2.0)
        phase[0] = "during"
        report = rotate_kek(store._core.storage.keys.keys)  # type: ignore[union-attr]
        stop.set()
        thread.join()
    rate = report.rewrapped / report.seconds
    print(f"{label} KEK rotation: {report.rewrapped:,} keys in {report.seconds:.2f} s = "
          f"{rate:,.0f}/s (target >= 5,000/s); done: {report.done}")  # fmt: skip
    for ph, xs in latencies.items():
        xs.sort()
        print(f"{label}   writer {ph} rotation: {len(xs)} appends, p50 "
              f"{statistics.median(xs) * 1000:.2f} ms, p99 {xs[int(len(xs) * 0.99)] * 1000:.2f} ms")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pg", default=os.environ.get("CTXSTORE_BENCH_PG",
                        "postgresql://postgres@127.0.0.1:5432/postgres"))  # fmt: skip
    parser.add_argument("--skip-pg", action="store_true")
    parser.add_argument("--keys", type=int, default=100_000)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="ctxstore-keys-"))
    counter = iter(range(10**6))

    def sqlite_url(name: str = "") -> str:
        return f"sqlite:///{folder / f'{name}{next(counter)}.db'}"

    bench_appends(sqlite_url, "SQLite", 200, 5)
    bench_cold(sqlite_url, "SQLite")
    bench_rotation(sqlite_url(), "SQLite", args.keys, folder)
    if args.skip_pg:
        return
    with scratch_databases(args.pg) as make:
        bench_appends(make, "PostgreSQL", 200, 5)
        bench_cold(lambda _name: make(), "PostgreSQL")
        bench_rotation(make(), "PostgreSQL", args.keys, folder)


if __name__ == "__main__":
    main()
