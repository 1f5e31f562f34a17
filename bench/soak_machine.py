"""The soak's machinery (soak.py): starting its processes, what its chaos loop does to the
world (a filesystem to fill, backends to terminate), and what it samples of each process
(memory, open files, the primary's connections)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def spawn(log: Path, *args: str, script: Path = HERE / "soak.py") -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path])}
    with log.open("ab") as err:
        return subprocess.Popen(
            [sys.executable, str(script), *args], env=env,
            stdout=subprocess.DEVNULL, stderr=err,
        )  # fmt: skip


def children(pid: int) -> list[int]:
    """A process's children (the MCP client's server)."""
    found: list[int] = []
    with suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            found += [int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
    return found


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


def fill(folder: Path) -> None:
    with suppress(OSError), (folder / "ballast").open("wb") as f:
        while True:
            f.write(b"\0" * (1 << 20))
            f.flush()


def terminate_backends(url: str) -> None:
    import psycopg

    with suppress(psycopg.Error), psycopg.connect(url, autocommit=True, connect_timeout=2) as c:
        c.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
        )


def connections(url: str) -> int:
    """The primary's client backends now (-1: it did not answer)."""
    import psycopg

    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=2) as c:
            row = c.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'"
            ).fetchone()
            return int(row[0]) if row else -1
    except psycopg.Error:
        return -1


def retried(step: Any, seconds: float = 60.0) -> None:
    """`step` tried again while the server refuses (a promoted primary taking every
    client's reconnection at once)."""
    import psycopg

    deadline = time.monotonic() + seconds
    while True:
        try:
            return step()  # type: ignore[no-any-return]
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def sample(pid: int) -> tuple[int, int] | None:
    """(resident kB, open files) of a process, or None once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None
    rss = [int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS")]
    return (rss[0], fds) if rss else None  # (a process that ended has none)


def growth(samples: dict[int, list[tuple[float, int, int]]]) -> dict[str, Any]:
    """The longest-lived writer's resident memory and open files: first sample after
    warming up, peak, last."""
    pid, rows = max(samples.items(), key=lambda kv: kv[1][-1][0] - kv[1][0][0])
    warm = rows[min(2, len(rows) - 1)]
    return {"writer pid": pid, "lived s": round(rows[-1][0] - rows[0][0]),
            "rss MB (warm, peak, last)": [round(warm[1] / 1024), round(max(r[1] for r in rows)
                                          / 1024), round(rows[-1][1] / 1024)],
            "open files (warm, peak, last)": [warm[2], max(r[2] for r in rows), rows[-1][2]]}  # fmt: skip


def peaks(memory: dict[str, list[tuple[float, int]]], seconds: float) -> dict[str, list[int]]:
    """Each process's peak resident memory (MB) in each tenth of the run (0: not running)."""
    peaks: dict[str, list[int]] = {}
    for name, rows in memory.items():
        tenths = [0] * 10
        for t, kb in rows:
            i = min(int(t / seconds * 10), 9)
            tenths[i] = max(tenths[i], round(kb / 1024))
        peaks[name] = tenths
    return peaks
