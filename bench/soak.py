"""The long run: writer processes drive mixed traffic while a chaos loop breaks things.

Each writer process works on contexts of its own: inserts, replaces, deletes, batches kept
and rolled back, compactions, forks, streamed replies, usage records, erasures, and an
OpenAI Agents SDK session through its integration. It notes each command in a journal
before it runs and its outcome after: acknowledged, refused as not stored, or unknown (a
writer killed in between). An audit reader follows the whole store with one cursor.
Beside them (soak_apps.py): model calls captured through the Agents SDK (on PostgreSQL) and
an OpenTelemetry-instrumented OpenAI client (on SQLite) against a local fake provider; the
projections' worker of each store; a searcher of each; an MCP client reading through
`ctxstore mcp`. Everything runs on a PostgreSQL primary with a synchronous standby (clusters
of the soak's own, through the multi-host URL) and on a SQLite file on a small filesystem
of its own. Meanwhile the chaos loop:

- SIGKILLs a writer, a capturing application or a worker, and starts it again;
- terminates every backend of the primary (what a restart does to clients);
- freezes the primary (SIGSTOP) for two seconds;
- fills the SQLite filesystem for two seconds;
- once, kills the primary and promotes the standby, then rebuilds the old primary as the
  new standby.

At the end: every chain verifies, every acknowledged command is stored exactly once, every
refused one is absent, every unknown one is there at most once, every erased context is
unreadable on both servers, the audit reader saw every event once, every captured call is
recorded at most once and none is lost, the search index answers as its rebuild and as the
visible messages do, and nothing answered with an untyped error (soak_check.py,
soak_check_apps.py). A table of what it did and what held is printed, with each process's
peak memory over the run.

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
from contextlib import suppress
from pathlib import Path
from typing import Any

import pg_cluster
import soak_machine as machine
from soak_check import Chaos, check, held, print_table

HERE = Path(__file__).resolve().parent
# The processes beside the writers (soak_apps.py), by name: "-pg" or "-lite" names the store.
APPS = {"agents-pg": "capture", "otel-lite": "capture", "work-pg": "worker",
        "work-lite": "worker", "search-pg": "searcher", "search-lite": "searcher",
        "mcp-pg": "mcp"}  # fmt: skip


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
    while True:  # opening meets the same terminations as reading: a typed refusal, retried
        try:
            opened = ContextStore.from_url(url, Settings(connect_timeout=2, statement_timeout=5))
            break
        except StoreUnavailableError:
            time.sleep(0.5)
    with opened as store:
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


def soak(seconds: float, writers: int = 4, *, failover_at: float = 0.5) -> dict[str, Any]:
    """Run the soak; the figures of what held (also printed as a table)."""
    root = Path(tempfile.mkdtemp(prefix="ctxstore-soak-"))
    pg_folder = pg_cluster.private_folder()
    primary = pg_cluster.Cluster(pg_folder)
    primary.init()
    with (primary.data / "postgresql.conf").open("a") as conf:  # (its standbys copy it)
        # Some ten processes with pools of their own reconnect at once to a promoted standby:
        # the default 100 left the soak's own connection none (the peak is in the table).
        conf.write("max_connections = 300\n")
    primary.start()
    clusters = [primary]
    try:
        standby = primary.base_backup(pg_cluster.private_folder(), standby=True)
        standby.start()
        clusters.append(standby)
        primary.require_sync_standby()
        with machine.small_disk(root / "disk") as disk_of_its_own:
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
    apps = root / "apps"  # the journals of the processes beside the writers (soak_apps.py)
    apps.mkdir()
    urls = {f"pg{i}": pg_url for i in range(max(count - 1, 1))} | {"lite": sqlite_url}
    roles = {name: "writer" for name in urls} | APPS
    urls |= {name: sqlite_url if name.endswith("-lite") else pg_url for name in APPS}
    started = time.monotonic()
    end = started + seconds
    procs: dict[str, subprocess.Popen[bytes]] = {}
    samples: dict[int, list[tuple[float, int, int]]] = defaultdict(list)
    memory: dict[str, list[tuple[float, int]]] = defaultdict(list)  # by process name
    connections: list[int] = []  # the primary's client backends, at each sample
    seed = 0

    def start(name: str) -> None:
        nonlocal seed
        seed += 1
        left = str(max(end - time.monotonic(), 1.0))
        log, role = root / f"{name}.log", roles[name]
        if role == "writer":
            journal = str(journals / f"{name}.jsonl")
            procs[name] = machine.spawn(log, role, urls[name], journal, name, left, str(seed))
        else:
            journal = str(apps / f"{name}.jsonl")
            procs[name] = machine.spawn(log, role, urls[name], journal, name, left, str(seed),
                                        str(journals), script=HERE / "soak_apps.py")  # fmt: skip

    for name in roles:
        start(name)
    audit = machine.spawn(
        root / "auditor.log", "auditor", pg_url, str(root / "audit.txt"), str(stop)
    )
    killable = [n for n in roles if roles[n] in ("writer", "capture", "worker")]
    try:
        chaos = Chaos()
        acts = (root / "chaos.jsonl").open("a", encoding="utf-8")  # when each act was done
        failed_over = False
        rng = random.Random(7)
        while time.monotonic() < end:
            time.sleep(rng.uniform(1.0, 3.0))
            now = time.monotonic()
            watched = {**procs, "auditor": audit}
            connections.append(machine.connections(primary.url))
            for name, p in watched.items():
                for pid, who in [
                    (p.pid, name),
                    *((c, f"{name} server") for c in machine.children(p.pid)),
                ]:
                    got = machine.sample(pid)
                    if got is not None:
                        memory[who].append((now - started, got[0]))
                        if roles.get(name) == "writer" and who == name:
                            samples[pid].append((now - started, *got))
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
                machine.retried(standby.require_sync_standby)
                primary, standby = standby, old
                continue
            act = rng.choice(["kill", "terminate", "freeze", "fill"])
            if act == "kill":
                name = rng.choice(killable)
                procs[name].send_signal(signal.SIGKILL)
                procs[name].wait()
                start(name)
            elif act == "terminate":
                machine.terminate_backends(primary.url)
            elif act == "freeze":
                primary.freeze()
                time.sleep(2.0)
                primary.thaw()
            elif act == "fill" and disk:
                machine.fill(root / "disk")
                time.sleep(2.0)
                (root / "disk" / "ballast").unlink(missing_ok=True)
            else:
                continue
            chaos.done[act] += 1
            acts.write(json.dumps({"t": time.time(), "act": act}) + "\n")
            acts.flush()
        for p in procs.values():
            p.wait(timeout=300)  # (capture flushes what it holds: up to 120 s)
        stop.touch()
        audit.wait(timeout=120)
    except BaseException:
        for p in [*procs.values(), audit]:  # no writer outlives a failed run
            with suppress(ProcessLookupError):
                p.kill()
        raise
    if os.environ.get("CTXSTORE_SOAK_KEEP"):  # the SQLite file as the run left it
        for f in (root / "disk").glob("soak.db*"):
            shutil.copy(f, root / f.name)
    found = check(journals, apps, root / "audit.txt", primary.url, standby.url, sqlite_url, chaos)
    for name, p in {**procs, "auditor": audit}.items():  # one died: say why
        if p.returncode:
            said = (root / f"{name}.log").read_text(errors="replace").strip().splitlines()
            found["untyped errors"].append(f"{name}: {said[-1] if said else p.returncode}")
    found["seconds"] = seconds
    found["memory"] = machine.growth(samples)
    found["memory over time"] = machine.peaks(memory, seconds)
    found["primary's client connections (peak)"] = max(connections, default=0)
    found["disk filled"] = chaos.done["fill"] if disk else "no filesystem of its own (not root)"
    print_table(found)
    return found


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
