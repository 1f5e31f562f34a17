"""Reliability under concurrent writer processes and SIGKILL, with the figures it measured.

    python bench/bench_reliability.py [--writers 8] [--commands 500] [--kills 50]
                                      [--pg URL] [--skip-pg]

Concurrent writers: several processes run a random mix of commands on ONE context (appends
with and without an expected version, batches rolled back or kept, compressions,
deletions). Checked: versions contiguous; every acknowledged command stored exactly once,
at its version, by its writer; no stored event that nobody acknowledged; the visible context
equal to a sequential replay of the stored events; the hash chain verifies.

Crashes: a writer appending and compacting is killed with SIGKILL at random moments, then
restarted, again and again. Checked: every acknowledged event is there; every compaction is
one compress event, no batch left open; the audit index catches
up with the event log; the chain verifies.

tests/integration/test_reliability.py runs both, smaller.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from scratch_pg import scratch_databases

from ctxstore.adapters.store.facade import ContextStore
from ctxstore.domain.context import Context

WORKERS = str(Path(__file__).with_name("workers.py"))
DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/postgres"


def run_mixed(url: str, writers: int, commands: int, seed: int = 0) -> dict[str, Any]:
    """Writers racing on one context; raises AssertionError naming any violation."""
    with ContextStore.from_url(url) as store:
        cid = store.create(name="racing writers")
    started = time.perf_counter()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                WORKERS,
                "mixed",
                url,
                str(cid),
                f"w{i}",
                str(commands),
                str(seed * 1000 + i),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(writers)
    ]
    acks: list[dict[str, Any]] = []
    refused: dict[str, int] = {}
    for p in procs:
        out, err = p.communicate(timeout=1800)
        assert p.returncode == 0, err[-3000:]
        for line in out.splitlines():
            record = json.loads(line)
            if "refused" in record:
                for k, v in record["refused"].items():
                    refused[k] = refused.get(k, 0) + v
            else:
                acks.append(record)
    elapsed = time.perf_counter() - started
    with ContextStore.from_url(url) as store:
        history = store.history(cid)
        events = {e.originator_version: e for e in store._core.events(cid)}
        versions = [h.version for h in history]
        assert versions == list(range(1, len(history) + 1)), "versions are not contiguous"
        by_version = {h.version: h for h in history}
        acked_versions = [a["version"] for a in acks]
        assert len(set(acked_versions)) == len(acked_versions), "two acks share a version"
        assert set(acked_versions) == set(versions[1:]), (
            "stored events and acknowledged commands differ: "
            f"lost {sorted(set(acked_versions) - set(versions))[:5]}, "
            f"unacknowledged {sorted(set(versions[1:]) - set(acked_versions))[:5]}"
        )
        inserted: list[str] = []
        for a in acks:
            h = by_version[a["version"]]
            assert (h.type, h.actor) == (a["op"], a["tag"]), (a, h.type, h.actor)
            if a["op"] == "insert":
                event = events[a["version"]]
                assert isinstance(event, Context.MessagesInserted)
                assert [m["content"] for m in event.messages] == [a["text"]]
                inserted.append(a["text"])
        assert len(inserted) == len(set(inserted)), "a message was stored twice"
        *_, (last_event, replayed, _) = store.replay(cid)
        assert last_event.version == len(history)
        assert replayed.model_dump() == store.visible(cid).model_dump(), "replay differs"
        assert store.verify(cid).ok
    return {
        "writers": writers,
        "commands": writers * commands,
        "acknowledged": len(acks),
        "events": len(history),
        "refused": refused,
        "seconds": elapsed,
        "commands_per_second": writers * commands / elapsed,
    }


def _lines(path: Path) -> int:
    return len(path.read_bytes().splitlines()) if path.exists() else 0


def run_crashes(url: str, kills: int, seed: int = 0) -> dict[str, Any]:
    """A writer killed with SIGKILL `kills` times; raises AssertionError naming a loss."""
    rng = random.Random(seed)
    with ContextStore.from_url(url) as store:
        cid = store.create(name="killed writer")
    with tempfile.TemporaryDirectory() as tmp:
        ack_file = Path(tmp) / "acks.jsonl"
        for k in range(kills):
            proc = subprocess.Popen(
                [sys.executable, WORKERS, "crashy", url, str(cid), f"k{k}", str(ack_file)],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            )  # fmt: skip
            # Killed at a random moment of writing: after its first acknowledgement (startup
            # takes 1-2 s on a busy machine), within half a second.
            acked_before = _lines(ack_file)
            deadline = time.monotonic() + 60
            while _lines(ack_file) == acked_before and time.monotonic() < deadline:
                if proc.poll() is not None:
                    break
                time.sleep(0.01)
            time.sleep(rng.uniform(0.0, 0.5))
            if proc.poll() is not None:
                raise AssertionError(f"the writer stopped by itself: {proc.stderr.read()!r}")  # type: ignore[union-attr]
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            proc.stderr.close()  # type: ignore[union-attr]
        lines = ack_file.read_text().splitlines()
    acked = []
    for line in lines:
        try:
            acked.append(json.loads(line))
        except json.JSONDecodeError:  # killed while writing this line: not acknowledged yet
            continue
    with ContextStore.from_url(url) as store:
        history = store.history(cid)
        by_version = {h.version: h for h in history}
        events = {e.originator_version: e for e in store._core.events(cid)}
        lost = [a for a in acked if a["version"] not in by_version]
        assert not lost, f"acknowledged and lost: {lost[:5]}"
        for a in acked:
            if a.get("compact"):
                assert by_version[a["version"]].type == "compress"
            else:
                event = events[a["version"]]
                assert isinstance(event, Context.MessagesInserted)
                assert event.messages[0]["content"].startswith(a["text"] + " ")
        compactions = 0
        for h in history:  # a compaction is one compress event: it opens no batch
            compactions += h.type == "compress"
            assert h.type != "batch_start", f"a batch opened at version {h.version}"
        assert store.visible(cid).batch == 0
        position = store.admin.refresh_audit_index()
        assert position == store._storage.recorder.max_notification_id()
        indexed = store._storage.audit_index.indexed_heads(cid.hex)
        assert indexed == {cid.hex: len(history)}, (indexed, len(history))
        assert store.verify(cid).ok
    return {"kills": kills, "acknowledged": len(acked), "events": len(history),
            "compactions": compactions, "lost": len(lost)}  # fmt: skip


def run_lost_replies(url: str, commands: int, every: int = 5, seed: int = 0) -> dict[str, Any]:
    """Commands through a proxy that loses the reply to one commit in `every` (PostgreSQL):
    inserts, conditional inserts and compactions; counts what was acknowledged, stored,
    doubled and lost. Raises AssertionError naming any violation."""
    from pg_proxy import LosingProxy

    rng = random.Random(seed)
    proxy = LosingProxy()
    host_port = url.split("@", 1)[1].split("/", 1)[0]
    try:
        with ContextStore.from_url(url.replace(host_port, f"127.0.0.1:{proxy.port}")) as store:
            cid = store.create(name="lost replies")
            acknowledged: list[str] = []  # the contents of acknowledged inserts, in order
            compactions = 0
            started = time.perf_counter()
            for n in range(commands):
                if rng.randrange(every) == 0:
                    proxy.arm()
                if n % 50 == 49:
                    done = store.compact(cid)
                    compactions += done.summary_id is not None
                    continue
                text = f"command {n}"
                expected = store.visible(cid).version if n % 3 == 0 else None
                store.insert(cid, [{"role": "user", "content": text}], expected_version=expected)
                acknowledged.append(text)
            seconds = time.perf_counter() - started
            proxy.armed.clear()
            inserted = [
                m["content"]
                for e in store._core.events(cid)
                if isinstance(e, Context.MessagesInserted)
                for m in e.messages
            ]
            compressed = sum(
                isinstance(e, Context.MessagesCompressed) for e in store._core.events(cid)
            )
            doubled = len(inserted) - len(set(inserted))
            lost = len(set(acknowledged) - set(inserted))
            assert doubled == 0, f"{doubled} inserts stored twice"
            assert lost == 0, f"{lost} acknowledged inserts missing"
            assert inserted == acknowledged, "stored inserts differ from the acknowledged ones"
            assert compressed == compactions, f"{compressed} compactions stored, {compactions} done"
            assert store.verify(cid).ok
    finally:
        proxy.close()
    return {
        "commands": commands, "replies_lost": proxy.lost, "acknowledged": len(acknowledged),
        "stored": len(inserted), "doubled": doubled, "lost": lost, "compactions": compactions,
        "commands_per_second": commands / seconds,
    }  # fmt: skip


def _timed(call: Any) -> tuple[float, BaseException | None]:
    started = time.perf_counter()
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - the caller judges what it is
        return time.perf_counter() - started, exc
    return time.perf_counter() - started, None


def _until_written(store: ContextStore, cid: Any, limit: float) -> float:
    """Seconds until an insert succeeds again (tried back to back); AssertionError when
    none has after `limit` seconds."""
    started = time.perf_counter()
    while True:
        _, failed = _timed(lambda: store.insert(cid, [{"role": "user", "content": "back"}]))
        waited = time.perf_counter() - started
        if failed is None:
            return waited
        assert waited <= limit, f"no write went through {limit} s after the server came back"


def _counting_waits(store: ContextStore) -> list[int]:
    """Count the waits for a pooled connection from here on (one list item, incremented)."""
    pool: Any = store._storage.recorder.datastore.pool  # type: ignore[attr-defined]
    waits = [0]
    getconn = pool.getconn

    def counted(timeout: float | None = None) -> Any:
        waits[0] += 1
        return getconn(timeout)

    pool.getconn = counted
    return waits


def run_outages(connect_timeout: int = 2, statement_timeout: int = 2) -> dict[str, Any]:
    """A store on a private PostgreSQL cluster whose server is stopped, started again,
    frozen (SIGSTOP) and thawed: how long a write and an uncached read take to fail, and how
    soon writes work again. Every failure must be a StoreUnavailableError."""
    from pg_cluster import private_cluster

    from ctxstore.adapters.settings import Settings
    from ctxstore.domain.errors import StoreUnavailableError

    settings = Settings(connect_timeout=connect_timeout, statement_timeout=statement_timeout)
    found: dict[str, Any] = {"connect_timeout": connect_timeout,
                             "statement_timeout": statement_timeout}  # fmt: skip
    with private_cluster() as cluster, ContextStore.from_url(cluster.url, settings) as store:
        cid = store.create(name="outages")
        other = store.create(name="read while down")
        store.insert(cid, [{"role": "user", "content": "before"}])
        store._core.cache.held(other).stale()  # its next read goes to the server
        cluster.stop()
        waits = _counting_waits(store)
        for name, call in (
            ("stopped_write", lambda: store.insert(cid, [{"role": "user", "content": "x"}])),
            ("stopped_read", lambda: store.visible(other)),
        ):
            before = waits[0]
            found[name], exc = _timed(call)
            found[f"{name}_connection_waits"] = waits[0] - before
            assert isinstance(exc, StoreUnavailableError), f"{name}: {exc!r}"
        time.sleep(3 * connect_timeout)  # a longer outage: the pool's backoff grows
        cluster.start()
        found["restart_to_write"] = _until_written(store, cid, 60)
        cluster.freeze()
        try:
            found["frozen_write"], exc = _timed(
                lambda: store.insert(cid, [{"role": "user", "content": "y"}])
            )
            assert isinstance(exc, StoreUnavailableError), f"frozen write: {exc!r}"
        finally:
            cluster.thaw()
        found["thaw_to_write"] = _until_written(store, cid, 60)
        assert store.verify(cid).ok
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--commands", type=int, default=500)
    parser.add_argument("--kills", type=int, default=50)
    parser.add_argument("--pg", default=os.environ.get("CTXSTORE_BENCH_PG", DEFAULT_PG))
    parser.add_argument("--skip-pg", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, scratch_databases(args.pg) as fresh:
        backends = [("SQLite", f"sqlite:///{Path(tmp) / 'rel.db'}")]
        if not args.skip_pg:
            backends.append(("PostgreSQL", fresh()))
        for label, url in backends:
            mixed = run_mixed(url, args.writers, args.commands)
            print(
                f"{label}: {mixed['writers']} writer processes x {args.commands} commands "
                f"on one context: {mixed['acknowledged']} acknowledged, "
                f"{mixed['events'] - 1} stored, 0 lost, 0 duplicated; "
                f"{mixed['commands_per_second']:.0f} commands/s; refused as conflicts "
                f"(typed): {mixed['refused']}"
            )
            crashes = run_crashes(url, args.kills)
            print(
                f"{label}: {crashes['kills']} SIGKILLs during appends and compactions: "
                f"{crashes['acknowledged']} acknowledged writes, {crashes['lost']} lost; "
                f"{crashes['compactions']} compactions, none half written; "
                "the audit index caught up; chain verified"
            )
        if not args.skip_pg:
            lost = run_lost_replies(fresh(), args.commands)
            print(
                f"PostgreSQL: {lost['commands']} commands, {lost['replies_lost']} replies to "
                f"committed writes lost on the way back: {lost['acknowledged']} inserts "
                f"acknowledged, {lost['stored']} stored, {lost['doubled']} doubled, "
                f"{lost['lost']} lost; {lost['compactions']} compactions, each written once; "
                f"{lost['commands_per_second']:.0f} commands/s; chain verified"
            )
            out = run_outages(connect_timeout=10, statement_timeout=30)
            print(
                f"PostgreSQL outages (connect timeout {out['connect_timeout']} s, statement "
                f"timeout {out['statement_timeout']} s): a write against a stopped server "
                f"failed (typed) after {out['stopped_write']:.1f} s, an uncached read after "
                f"{out['stopped_read']:.1f} s; writes worked {out['restart_to_write']:.1f} s "
                f"after the server started again; a write against a frozen server failed "
                f"after {out['frozen_write']:.1f} s, and writes worked "
                f"{out['thaw_to_write']:.1f} s after it thawed"
            )


if __name__ == "__main__":
    main()
