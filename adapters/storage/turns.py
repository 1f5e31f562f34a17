"""Writers that keep losing races on one context take a turn instead.

Commands are optimistic: read the context, decide, insert the next version, retry if another
writer stored it first. When many writers append to one context flat out, the writer that
stored last holds the newest state and wins again at once, while the others keep reading
state that is stale by the time they write: retries can run out. So a writer that has lost
ESCALATE_AFTER races within one command takes the context's turn, a cross-process lock per
context: it reads the newest state and writes while it holds it. A racer's insert meanwhile
is refused at once (it would lose), and that racer takes a turn next, so the holder's write
cannot lose and every command ends within a few attempts. A writer that meets others taking
turns on a context (refused, or finding under its turn that others wrote) takes turns there
directly for CONTENDED_FOR seconds, renewed while that lasts: under sustained contention the
writers queue instead of racing, and a refused race (whose half-applied state must be
reloaded) stays rare. Without contention nobody takes a turn, and appends cost what they
did; with a few writers on one context, turns are slower than racing alone would be, but no
command gives up (docs/scaling.md has both).

PostgreSQL: a session advisory lock keyed by the context id; every insert tries the same key
shared inside the events table's insert function (adapters/storage/audit_index.py) and is refused
while a holder has it; the holder writes on the connection that holds the lock.
SQLite: a one-byte POSIX record lock in a file beside the database, at an offset given by the
context id, exclusive for the holder and tried shared around a racer's insert (a crashed
holder's lock goes with its process). memory://: one process, whose own lock per context suffices.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast
from uuid import UUID

import psycopg
from eventsourcing.persistence import IntegrityError
from eventsourcing.postgres import PostgresDatastore
from eventsourcing.sqlite import SQLiteDatastore

ESCALATE_AFTER = 3  # races lost within one command before its writer takes a turn
CONTENDED_FOR = 1.0  # seconds a writer keeps taking turns on a context where others do
TURN_HELD = "another writer holds the turn of this context"  # a racer's insert refused at once
TURN_HELD_SQLSTATE = "23T01"  # class 23: the library raises it as an IntegrityError
TURN_SETTING = "ctxstore.turn"  # PostgreSQL: the turn a session holds (its inserts go ahead)
WAIT = "30s"  # PostgreSQL: the longest a writer queues for a turn before it races again

try:  # POSIX record locks; elsewhere SQLite writers only race (and retry)
    import fcntl
except ImportError:  # pragma: no cover - not on Linux or macOS
    fcntl = None  # type: ignore[assignment]


def context_lock_key(cid: UUID) -> int:
    """The lock key of a context: the first 64 bits of its id, as a signed bigint (what the
    insert function computes from originator_id in SQL)."""
    return int.from_bytes(cid.bytes[:8], "big", signed=True)


def _offset(cid: UUID) -> int:
    return context_lock_key(cid) & 0x7FFF_FFFF_FFFF  # 47 bits: within any off_t


@dataclass(frozen=True)
class Turn:
    """A held turn; on PostgreSQL, the connection that holds it (the write goes there)."""

    connection: Any = None


class _Byte:
    """One context's byte of the turns file, as this process uses it. POSIX record locks
    belong to a process, not a thread or a descriptor: this process's racers share one
    shared lock, and its holder waits for them, so no thread turns another's lock over."""

    def __init__(self, fd: int, offset: int) -> None:
        self.fd, self.offset = fd, offset
        self.changed = threading.Condition()
        self.racers = 0
        self.held = False

    def join_racers(self) -> None:
        """Before a racer's insert: refused while a writer holds the turn."""
        with self.changed:
            if self.held:
                raise IntegrityError(TURN_HELD)  # a writer of this process holds the turn
            if self.racers == 0:
                try:
                    fcntl.lockf(self.fd, fcntl.LOCK_SH | fcntl.LOCK_NB, 1, self.offset)
                except OSError as exc:  # EAGAIN/EACCES: another process holds the turn
                    raise IntegrityError(TURN_HELD) from exc
            self.racers += 1

    def leave_racers(self) -> None:
        """After a racer's insert, stored or not."""
        with self.changed:
            self.racers -= 1
            if self.racers == 0:
                fcntl.lockf(self.fd, fcntl.LOCK_UN, 1, self.offset)
                self.changed.notify_all()

    @contextmanager
    def turn(self) -> Iterator[None]:
        with self.changed:
            self.changed.wait_for(lambda: not self.held and self.racers == 0)
            self.held = True
        try:
            fcntl.lockf(self.fd, fcntl.LOCK_EX, 1, self.offset)  # other processes' turns
            try:
                yield
            finally:
                fcntl.lockf(self.fd, fcntl.LOCK_UN, 1, self.offset)
        finally:
            with self.changed:
                self.held = False
                self.changed.notify_all()


_BYTES: dict[tuple[str, int], _Byte] = {}
_BYTES_GUARD = threading.Lock()


def _byte(fd: int, path: str, offset: int) -> _Byte:
    """The process-wide state of one context's byte (one per file and offset, whichever
    store of this process asks)."""
    with _BYTES_GUARD:
        found = _BYTES.get((path, offset))
        if found is None:
            if len(_BYTES) > 100_000:  # forget idle ones; a busy one is kept
                for key in [k for k, v in _BYTES.items() if not v.held and not v.racers]:
                    del _BYTES[key]
            found = _BYTES[(path, offset)] = _Byte(fd, offset)
        return found


class _Racer:
    """Around one racer's insert: a context manager of its own, as it runs on every append
    (a generator's would cost more than the lock)."""

    __slots__ = ("byte",)

    def __init__(self, byte: _Byte) -> None:
        self.byte = byte

    def __enter__(self) -> None:
        self.byte.join_racers()

    def __exit__(self, *exc: object) -> None:
        self.byte.leave_racers()


class Turns:
    """The turn locks of one store's database, and the contexts it finds contended."""

    def __init__(self, recorder: Any) -> None:
        self._datastore = getattr(recorder, "datastore", None)
        self._locks_file = isinstance(self._datastore, SQLiteDatastore) and fcntl is not None
        self._file: int | None = None
        self._path = ""
        self._file_guard = threading.Lock()
        self._contended: dict[UUID, float] = {}  # context -> monotonic time it stays so

    def contended(self, cid: UUID) -> bool:
        """Whether this store's writers should take turns on the context without racing."""
        until = self._contended.get(cid)
        if until is not None and until < time.monotonic():
            self._contended.pop(cid, None)
            return False
        return until is not None

    def saw_others(self, cid: UUID) -> None:
        """Others take turns on the context, or wrote under this writer's turn: take turns
        there for CONTENDED_FOR seconds (racing would only be refused, or lose)."""
        if len(self._contended) > 10_000:
            self._contended.clear()
        self._contended[cid] = time.monotonic() + CONTENDED_FOR

    def wanted(self, cid: UUID, attempt: int, refused: bool) -> bool:
        """Whether this attempt takes the context's turn: after ESCALATE_AFTER lost races,
        after a refusal (another holds it), or while the context is contended."""
        return refused or attempt >= ESCALATE_AFTER or self.contended(cid)

    def turn(self, cid: UUID, wanted: bool) -> AbstractContextManager[Turn | None]:
        """The context's turn when `wanted` (see `wanted`); None: race."""
        if not wanted:
            return nullcontext()
        return self._turn(cid)

    @contextmanager
    def _turn(self, cid: UUID) -> Iterator[Turn | None]:
        if isinstance(self._datastore, PostgresDatastore):
            with self._postgres_turn(self._datastore, cid) as held:
                yield held
        elif self._locks_file:
            with self._sqlite_turn(cast(SQLiteDatastore, self._datastore), cid) as held:
                yield held
        else:
            yield None

    def racing(self, cid: UUID) -> AbstractContextManager[None]:
        """Around a racer's insert: while another writer holds the context's turn, refuse
        it at once (IntegrityError naming TURN_HELD: the racer would lose; it takes a turn
        next). PostgreSQL's insert function refuses by itself."""
        if not self._locks_file:
            return nullcontext()
        found = self._turns_file(cast(SQLiteDatastore, self._datastore))
        if found is None:
            return nullcontext()
        return _Racer(_byte(*found, _offset(cid)))

    @contextmanager
    def _postgres_turn(self, datastore: PostgresDatastore, cid: UUID) -> Iterator[Turn | None]:
        key = context_lock_key(cid)
        with datastore.get_connection() as conn:
            # One round trip each way: the wait is bounded, and the connection goes back to
            # the pool as it came (its own lock timeout restored, the lock released).
            try:
                row = conn.execute(
                    "SELECT current_setting('lock_timeout') AS was, "
                    "set_config('lock_timeout', %s, false), pg_advisory_lock(%s), "
                    "set_config(%s, %s, false)",
                    (WAIT, key, TURN_SETTING, str(key)),
                ).fetchone()
            except psycopg.errors.LockNotAvailable:
                # The failed statement's set_config is undone with it.
                yield None  # queued too long (a stuck holder?): race once more
                return
            was = row["was"] if row else "0"
            try:
                yield Turn(conn)
            finally:
                conn.execute(
                    "SELECT pg_advisory_unlock(%s), set_config('lock_timeout', %s, false), "
                    "set_config(%s, '', false)",
                    (key, was, TURN_SETTING),
                )

    @contextmanager
    def _sqlite_turn(self, datastore: SQLiteDatastore, cid: UUID) -> Iterator[Turn | None]:
        found = self._turns_file(datastore)
        if found is None:
            yield None
            return
        with _byte(*found, _offset(cid)).turn():
            yield Turn()

    def _turns_file(self, datastore: SQLiteDatastore) -> tuple[int, str] | None:
        """The lock file beside the database, opened once per process (see _open)."""
        if self._file is not None:  # opened: no need to queue for the guard
            return self._file, self._path
        with self._file_guard:
            if self._file is None:
                if datastore.pool.is_sqlite_memory_mode:
                    return None
                name = str(datastore.pool.db_name).removeprefix("file:").split("?", 1)[0]
                self._path = str(Path(name + "-turns").resolve())
                self._file = _open(self._path)
            return self._file, self._path

    def close(self) -> None:
        with self._file_guard:
            if self._file is not None:
                _close(self._path)
                self._file = None


# One descriptor per turns file per process, shared by its stores: closing any descriptor
# of a file drops every record lock the process holds on it, so it is closed only when the
# last store using it closes.
_FILES: dict[str, list[int]] = {}  # path -> [descriptor, stores using it]


def _open(path: str) -> int:
    with _BYTES_GUARD:
        found = _FILES.get(path)
        if found is None:
            found = _FILES[path] = [os.open(path, os.O_RDWR | os.O_CREAT, 0o600), 0]
        found[1] += 1
        return found[0]


def _close(path: str) -> None:
    with _BYTES_GUARD:
        found = _FILES.get(path)
        if found is None:
            return
        found[1] -= 1
        if found[1] == 0:
            del _FILES[path]
            for key in [k for k in _BYTES if k[0] == path]:
                del _BYTES[key]
            os.close(found[0])


__all__ = [
    "CONTENDED_FOR", "ESCALATE_AFTER", "TURN_HELD", "TURN_HELD_SQLSTATE", "TURN_SETTING", "Turn", "Turns",
    "context_lock_key",
]  # fmt: skip
