"""A private PostgreSQL cluster, started in a temporary folder on its own port, that a test or
a benchmark may stop, start again, freeze (SIGSTOP) and thaw — never the shared server.

Used by tests/integration/test_outages.py, test_replicas.py, test_failover.py and
bench_reliability.py.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

BIN = Path("/usr/lib/postgresql/15/bin")


def available() -> bool:
    """Whether this machine can start a private cluster (PostgreSQL 15's binaries)."""
    return (BIN / "initdb").exists() and (BIN / "pg_ctl").exists()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_owner() -> list[str]:
    """PostgreSQL refuses to run as root: run its tools as the postgres user then."""
    return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []


class Cluster:
    def __init__(self, folder: Path, port: int | None = None) -> None:
        self.data = folder / "data"
        self.port = port or _free_port()
        self.log = folder / "server.log"
        self.frozen: list[int] = []

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _ctl(self, *args: str) -> None:
        subprocess.run(
            [*_as_owner(), str(BIN / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), *args],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def init(self) -> None:
        subprocess.run(
            [*_as_owner(), str(BIN / "initdb"), "-D", str(self.data), "-A", "trust", "-U",
             "postgres", "--no-sync"],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write(
                f"\nport = {self.port}\nlisten_addresses = '127.0.0.1'\n"
                f"unix_socket_directories = '{self.data}'\nfsync = off\n"
            )

    def base_backup(
        self, folder: Path, *, standby: bool = False, port: int | None = None
    ) -> Cluster:
        """A base backup of this running cluster (pg_basebackup, its WAL streamed), as a
        cluster of its own on another port, not started. With `standby`, it starts as a
        hot standby streaming from this one (pg_basebackup -R writes standby.signal and
        primary_conninfo)."""
        copy = Cluster(folder, port)
        subprocess.run(
            [*_as_owner(), str(BIN / "pg_basebackup"), "-D", str(copy.data), "-h", "127.0.0.1",
             "-p", str(self.port), "-U", "postgres", "-X", "stream", "--no-sync", "--checkpoint=fast",
             *(["-R"] if standby else [])],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        with (copy.data / "postgresql.conf").open("a") as conf:
            conf.write(f"\nport = {copy.port}\nunix_socket_directories = '{copy.data}'\n")
        # The sockets live in the data folder, and the backup copies their lock files: a
        # copy on the port of a server the source was copied from would take it for running.
        for lock in copy.data.glob(".s.PGSQL.*.lock"):
            lock.unlink()
        return copy

    def start(self) -> None:
        self._ctl("-w", "-t", "30", "start")

    def stop(self) -> None:
        """A fast shutdown: sessions are ended, the server is gone until start()."""
        self._ctl("-w", "-m", "fast", "stop")

    def _processes(self) -> list[int]:
        postmaster = int((self.data / "postmaster.pid").read_text().split()[0])
        found = [postmaster]
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    stat = (entry / "stat").read_text()
                except OSError:
                    continue
                if int(stat.rsplit(")", 1)[1].split()[1]) == postmaster:
                    found.append(int(entry.name))
        return found

    def kill(self) -> None:
        """SIGKILL the server and its backends at once: a machine lost mid-write (nothing
        is flushed or shut down; its connections end with a reset)."""
        for pid in self._processes():
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        (self.data / "postmaster.pid").unlink(missing_ok=True)

    def promote(self) -> None:
        """Make this standby the primary (pg_ctl promote, waiting until it takes writes)."""
        self._ctl("-w", "-t", "30", "promote")

    def require_sync_standby(self) -> None:
        """Commits wait until a standby has flushed them (synchronous_standby_names '*')."""
        self.settings(synchronous_standby_names="'*'", synchronous_commit="on")

    def settings(self, **values: str) -> None:
        """ALTER SYSTEM each setting and reload the configuration."""
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            for name, value in values.items():
                conn.execute(f"ALTER SYSTEM SET {name} = {value}")
            conn.execute("SELECT pg_reload_conf()")

    def replayed(self, source: Cluster) -> None:
        """Wait (10 s at most) until this standby has replayed all `source` wrote so far."""
        import psycopg

        with psycopg.connect(source.url, autocommit=True) as p:
            lsn = p.execute("SELECT pg_current_wal_lsn()").fetchone()[0]  # type: ignore[index]
        with psycopg.connect(self.url, autocommit=True) as s:
            for _ in range(1000):
                row = s.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,)).fetchone()
                if row and row[0]:
                    return
                time.sleep(0.01)
        raise AssertionError(f"the standby on port {self.port} did not catch up in 10 s")

    def freeze(self) -> None:
        """SIGSTOP the server and its backends: connections stay open, nothing answers.
        The server first, then its backends until a look finds none not stopped: a
        backend forked while they were listed (a pool reconnecting) is stopped too."""
        self.frozen = []
        while True:
            fresh = [pid for pid in self._processes() if pid not in self.frozen]
            if not fresh:
                return
            for pid in fresh:
                with suppress(ProcessLookupError):  # a backend that ended meanwhile
                    os.kill(pid, signal.SIGSTOP)
                self.frozen.append(pid)

    def thaw(self) -> None:
        for pid in self.frozen:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        self.frozen = []


def private_folder() -> Path:
    """A temporary folder the PostgreSQL tools may write in."""
    folder = Path(tempfile.mkdtemp(prefix="ctxstore-pg-"))
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres", "postgres")
    return folder


@contextmanager
def private_cluster() -> Iterator[Cluster]:
    """A running private cluster, stopped and removed afterwards."""
    folder = private_folder()
    cluster = Cluster(folder)
    try:
        cluster.init()
        cluster.start()
        yield cluster
    finally:
        cluster.thaw()
        with suppress(subprocess.CalledProcessError):
            cluster.stop()
        shutil.rmtree(folder, ignore_errors=True)
