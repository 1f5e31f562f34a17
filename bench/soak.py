"""The long run: writer processes drive mixed traffic while a chaos loop breaks things.

Each writer process works on contexts of its own: inserts, replaces, deletes, batches kept
and rolled back, compactions, forks, streamed replies, usage records, erasures, and an
OpenAI Agents SDK session through its integration. It notes each command in a journal
before it runs and its outcome after: acknowledged, refused as not stored, or unknown (a
writer killed in between). An audit reader follows the whole store with one cursor. The writers run on a PostgreSQL primary with a
synchronous standby (clusters of the soak's own, through the multi-host URL) and on a
SQLite file on a small filesystem of its own. Meanwhile the chaos loop:

- SIGKILLs a writer and starts it again;
- terminates every backend of the primary (what a restart does to clients);
- freezes the primary (SIGSTOP) for two seconds;
- fills the SQLite filesystem for two seconds;
- once, kills the primary and promotes the standby, then rebuilds the old primary as the
  new standby.

At the end: every chain verifies, every acknowledged command is stored exactly once, every
refused one is absent, every unknown one is there at most once, every erased context is
unreadable on both servers, the audit reader saw every event once, and the writers' memory
and open files did not grow without bound (soak_check.py). A table of what it did and what
held is printed.

    python bench/soak.py [--seconds 1800] [--writers 4]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pg_cluster
from soak_check import Chaos, check, held, print_table

HERE = Path(__file__).resolve().parent


# ---- a writer process ------------------------------------------------------------------

KINDS = ["insert"] * 8 + ["replace", "delete", "batch_start", "batch_end", "compact", "fork",
                          "stream", "usage", "session", "erase"]  # fmt: skip


def writer(url: str, journal: Path, name: str, seconds: float, seed: int) -> None:
    """Mixed commands until `seconds` pass (or the process is killed), each noted."""
    import asyncio

    from ctxstore.adapters.integrations.agents_session import CtxStoreSession
    from ctxstore.adapters.settings import Settings
    from ctxstore.adapters.store.facade import ContextStore
    from ctxstore.domain.errors import CtxStoreError, OutcomeUnknownError, StoreUnavailableError

    rng = random.Random(seed)
    out = journal.open("a", encoding="utf-8")

    def note(**fields: Any) -> None:
        # Flushed to the kernel: a writer killed (not its machine) loses nothing written.
        out.write(json.dumps({**fields, "t": time.time()}) + "\n")
        out.flush()

    settings = Settings(actor=name, connect_timeout=2, statement_timeout=5)
    deadline = time.monotonic() + seconds
    n = 0
    with ContextStore.from_url(url, settings) as store:
        contexts: list[str] = []
        session = CtxStoreSession(f"{name}-{os.getpid()}", store)
        while time.monotonic() < deadline:
            n += 1
            mark = f"{name}.{os.getpid()}.{n}"
            kind = "create" if len(contexts) < 2 else rng.choice(KINDS)
            cid = rng.choice(contexts) if contexts else None
            note(kind=kind, mark=mark, cid=cid, ok="pending")  # killed before its outcome: unknown
            try:
                if kind == "create":
                    contexts.append(str(store.create(name=mark)))
                    note(kind=kind, mark=mark, cid=contexts[-1], ok=True)
                elif kind == "session":
                    asyncio.run(session.add_items([{"role": "user", "content": mark}]))
                    note(kind=kind, mark=mark, ok=True)
                else:
                    version = command(store, kind, cid, mark, rng)
                    if kind == "erase" and cid is not None:
                        contexts.remove(cid)
                    note(kind=kind, mark=mark, cid=cid, ok=True, version=version)
            except OutcomeUnknownError as exc:
                note(kind=kind, mark=mark, cid=cid, ok=None, command=exc.command_id)
            except StoreUnavailableError as exc:
                note(kind=kind, mark=mark, cid=cid, ok=False, error=str(exc)[:160])
                time.sleep(0.05)
            except CtxStoreError as exc:  # the command itself refused: nothing stored
                note(kind=kind, mark=mark, cid=cid, ok=False, refused=type(exc).__name__)
            except Exception as exc:  # noqa: BLE001 - untyped: a defect, counted
                note(kind=kind, mark=mark, cid=cid, ok=False, untyped=repr(exc)[:300])


def command(store: Any, kind: str, cid: Any, mark: str, rng: random.Random) -> int | None:
    """One command of `kind` on context `cid`, carrying `mark` where it stores text; the
    version it wrote. Steps before it may fail (then it never ran); steps after it do not
    change its outcome."""
    user = {"role": "user", "content": mark}
    if kind == "insert":
        return int(store.insert(cid, [user]).version)
    if kind in ("replace", "delete"):
        seen = store.visible(cid).messages
        if not seen:
            return int(store.insert(cid, [user]).version) if kind == "replace" else None
        if kind == "delete":
            return int(store.delete(cid, [rng.choice(seen).id]).version)
        return int(store.replace(cid, seen[-1].id, {"role": "assistant", "content": mark}).version)
    if kind == "batch_start":
        return int(store.batch_start(cid).version)
    if kind == "batch_end":
        return int(store.batch_end(cid, keep=rng.random() < 0.5).version)
    if kind == "compact":
        return store.compact(cid).version  # type: ignore[no-any-return]  # (None: skipped)
    if kind == "fork":
        store.fork(cid, name=mark)
        return None
    if kind == "stream":
        begun = store.begin(cid, {"role": "assistant", "content": ""})
        version = int(store.append(cid, begun.ids[0], [{"text": mark}]).version)
        with suppress(Exception):
            store.finish(cid, begun.ids[0])
        return version
    if kind == "usage":
        return int(store.record_usage(cid, model="gpt-4o", prompt_tokens=10).version)
    if kind == "erase":
        store.erase(cid, reason=f"soak {mark}", with_forks=True)
        return None
    raise ValueError(kind)


# ---- the audit reader -------------------------------------------------------------------


def auditor(url: str, journal: Path, stop: Path) -> None:
    """Follow the whole store's audit with one cursor; note each (context, version) read."""
    from ctxstore.adapters.settings import Settings
    from ctxstore.adapters.store.facade import ContextStore
    from ctxstore.domain.errors import StoreUnavailableError

    out = journal.open("a", encoding="utf-8")
    cursor: Any = 0
    with ContextStore.from_url(url, Settings(connect_timeout=2, statement_timeout=5)) as store:
        last_look = False
        while True:
            try:
                page = store.audit(after=cursor, limit=500)
            except StoreUnavailableError:
                time.sleep(0.5)
                continue
            for e in page.entries:
                out.write(f"{e.context_id} {e.version}\n")
            out.flush()
            cursor = page.cursor
            if page.more:
                continue
            if last_look:
                return
            if stop.exists():
                last_look = True  # one more read after the writers ended
                time.sleep(1.0)
                continue
            time.sleep(0.2)


# ---- the run ----------------------------------------------------------------------------


def _spawn(log: Path, *args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path])}
    with log.open("ab") as err:
        return subprocess.Popen(
            [sys.executable, str(Path(__file__)), *args], env=env,
            stdout=subprocess.DEVNULL, stderr=err,
        )  # fmt: skip


@contextmanager
def small_disk(folder: Path, megabytes: int = 64) -> Any:
    """A filesystem of its own (tmpfs, as root) that the chaos loop can fill; else a plain
    folder (the disk is then never filled)."""
    folder.mkdir(parents=True, exist_ok=True)
    mounted = os.geteuid() == 0 and subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={megabytes}m", "tmpfs", str(folder)],
        check=False, capture_output=True,
    ).returncode == 0  # fmt: skip
    try:
        yield mounted
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(folder)], check=False, capture_output=True)


def _fill(folder: Path) -> None:
    with suppress(OSError), (folder / "ballast").open("wb") as f:
        while True:
            f.write(b"\0" * (1 << 20))
            f.flush()


def _terminate_backends(url: str) -> None:
    import psycopg

    with suppress(psycopg.Error), psycopg.connect(url, autocommit=True, connect_timeout=2) as c:
        c.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
        )


def _sample(pid: int) -> tuple[int, int] | None:
    """(resident kB, open files) of a process, or None once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None
    rss = [int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS")]
    return (rss[0], fds) if rss else None  # (a process that ended has none)


def soak(seconds: float, writers: int = 4, *, failover_at: float = 0.5) -> dict[str, Any]:
    """Run the soak; the figures of what held (also printed as a table)."""
    root = Path(tempfile.mkdtemp(prefix="ctxstore-soak-"))
    pg_folder = pg_cluster.private_folder()
    primary = pg_cluster.Cluster(pg_folder)
    primary.init()
    primary.start()
    clusters = [primary]
    try:
        standby = primary.base_backup(pg_cluster.private_folder(), standby=True)
        standby.start()
        clusters.append(standby)
        primary.require_sync_standby()
        with small_disk(root / "disk") as disk_of_its_own:
            return _soak(root, seconds, writers, clusters, disk_of_its_own, failover_at)
    finally:
        for c in clusters:
            c.thaw()
            with suppress(subprocess.CalledProcessError, FileNotFoundError):
                c.stop()
            shutil.rmtree(c.data.parent, ignore_errors=True)
        if not os.environ.get("CTXSTORE_SOAK_KEEP"):  # (kept: the journals and logs)
            shutil.rmtree(root, ignore_errors=True)


def _soak(
    root: Path, seconds: float, count: int, clusters: list[Any], disk: bool, failover_at: float
) -> dict[str, Any]:
    primary, standby = clusters
    hosts = f"127.0.0.1:{primary.port},127.0.0.1:{standby.port}"
    pg_url = f"postgresql://postgres@{hosts}/postgres?target_session_attrs=read-write"
    sqlite_url = f"sqlite:///{root / 'disk' / 'soak.db'}"
    from ctxstore.adapters.store.facade import ContextStore

    for url in (pg_url, sqlite_url):  # the schema, before the writers race to make it
        ContextStore.from_url(url).close()
    journals = root / "journals"
    journals.mkdir()
    stop = root / "stop"
    urls = {f"pg{i}": pg_url for i in range(max(count - 1, 1))} | {"lite": sqlite_url}
    started = time.monotonic()
    end = started + seconds
    procs: dict[str, subprocess.Popen[bytes]] = {}
    samples: dict[int, list[tuple[float, int, int]]] = defaultdict(list)
    seed = 0

    def start(name: str) -> None:
        nonlocal seed
        seed += 1
        left = max(end - time.monotonic(), 1.0)
        procs[name] = _spawn(root / f"{name}.log", "writer", urls[name], str(journals / f"{name}.jsonl"), name,
                             str(left), str(seed))  # fmt: skip

    for name in urls:
        start(name)
    audit = _spawn(root / "auditor.log", "auditor", pg_url, str(root / "audit.txt"), str(stop))
    try:
        chaos = Chaos()
        failed_over = False
        rng = random.Random(7)
        while time.monotonic() < end:
            time.sleep(rng.uniform(1.0, 3.0))
            now = time.monotonic()
            for p in procs.values():
                got = _sample(p.pid)
                if got is not None:
                    samples[p.pid].append((now - started, *got))
            if now >= end:
                break
            if not failed_over and now - started >= seconds * failover_at:
                failed_over = True
                primary.kill()
                time.sleep(0.5)
                standby.promote()
                chaos.failovers.append(time.time())
                chaos.done["failover"] += 1
                old = standby.base_backup(
                    pg_cluster.private_folder(), standby=True, port=primary.port
                )
                old.start()
                clusters.append(old)
                standby.require_sync_standby()
                primary, standby = standby, old
                continue
            act = rng.choice(["kill", "terminate", "freeze", "fill"])
            if act == "kill":
                name = rng.choice(sorted(procs))
                procs[name].send_signal(signal.SIGKILL)
                procs[name].wait()
                start(name)
            elif act == "terminate":
                _terminate_backends(primary.url)
            elif act == "freeze":
                primary.freeze()
                time.sleep(2.0)
                primary.thaw()
            elif act == "fill" and disk:
                _fill(root / "disk")
                time.sleep(2.0)
                (root / "disk" / "ballast").unlink(missing_ok=True)
            else:
                continue
            chaos.done[act] += 1
        for p in procs.values():
            p.wait(timeout=120)
        stop.touch()
        audit.wait(timeout=120)
    except BaseException:
        for p in [*procs.values(), audit]:  # no writer outlives a failed run
            with suppress(ProcessLookupError):
                p.kill()
        raise
    found = check(journals, root / "audit.txt", primary.url, standby.url, sqlite_url, chaos)
    if audit.returncode:  # the auditor died: say why, beside what it then missed
        said = (root / "auditor.log").read_text(errors="replace").strip().splitlines()
        found["untyped errors"].append(f"auditor: {said[-1] if said else audit.returncode}")
    found["seconds"] = seconds
    found["memory"] = _growth(samples)
    found["disk filled"] = chaos.done["fill"] if disk else "no filesystem of its own (not root)"
    print_table(found)
    return found


def _growth(samples: dict[int, list[tuple[float, int, int]]]) -> dict[str, Any]:
    """The longest-lived writer's resident memory and open files: first sample after
    warming up, peak, last."""
    pid, rows = max(samples.items(), key=lambda kv: kv[1][-1][0] - kv[1][0][0])
    warm = rows[min(2, len(rows) - 1)]
    return {"writer pid": pid, "lived s": round(rows[-1][0] - rows[0][0]),
            "rss MB (warm, peak, last)": [round(warm[1] / 1024), round(max(r[1] for r in rows)
                                          / 1024), round(rows[-1][1] / 1024)],
            "open files (warm, peak, last)": [warm[2], max(r[2] for r in rows), rows[-1][2]]}  # fmt: skip


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "writer":
        _, _, url, journal, name, seconds, seed = sys.argv
        writer(url, Path(journal), name, float(seconds), int(seed))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "auditor":
        auditor(sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=1800)
    parser.add_argument("--writers", type=int, default=4)
    args = parser.parse_args()
    found = soak(args.seconds, args.writers)
    failed = held(found)
    print("held: everything" if not failed else f"did not hold: {', '.join(failed)}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
