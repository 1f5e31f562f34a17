"""One-byte POSIX record locks in a file, a byte per key: the turns of SQLite writers.

Record locks belong to a process, not a thread or a descriptor: this process's racers on a
key share one shared lock and its holder waits for them, so no thread turns another's lock
over; and one descriptor per file is kept per process, closed with the last user, because
closing any descriptor of a file drops every record lock the process holds on it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from uuid import UUID

from eventsourcing.persistence import IntegrityError

from ctxstore.adapters.storage.turns import TURN_HELD, context_lock_key

try:  # POSIX record locks; elsewhere SQLite writers only race (and retry)
    import fcntl
except ImportError:  # pragma: no cover - not on Linux or macOS
    fcntl = None  # type: ignore[assignment]

AVAILABLE = fcntl is not None


def offset(cid: UUID) -> int:
    """A context's byte in the file."""
    return context_lock_key(cid) & 0x7FFF_FFFF_FFFF  # 47 bits: within any off_t


class Byte:
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


_BYTES: dict[tuple[str, int], Byte] = {}
_BYTES_GUARD = threading.Lock()


def byte(fd: int, path: str, offset: int) -> Byte:
    """The process-wide state of one context's byte (one per file and offset, whichever
    store of this process asks)."""
    with _BYTES_GUARD:
        found = _BYTES.get((path, offset))
        if found is None:
            if len(_BYTES) > 100_000:  # forget idle ones; a busy one is kept
                for key in [k for k, v in _BYTES.items() if not v.held and not v.racers]:
                    del _BYTES[key]
            found = _BYTES[(path, offset)] = Byte(fd, offset)
        return found


class Racer:
    """Around one racer's insert: a context manager of its own, as it runs on every append
    (a generator's would cost more than the lock)."""

    __slots__ = ("byte",)

    def __init__(self, byte: Byte) -> None:
        self.byte = byte

    def __enter__(self) -> None:
        self.byte.join_racers()

    def __exit__(self, *exc: object) -> None:
        self.byte.leave_racers()


# One descriptor per turns file per process, shared by its stores: closing any descriptor
# of a file drops every record lock the process holds on it, so it is closed only when the
# last store using it closes.
_FILES: dict[str, list[int]] = {}  # path -> [descriptor, stores using it]


def open_file(path: str) -> int:
    with _BYTES_GUARD:
        found = _FILES.get(path)
        if found is None:
            found = _FILES[path] = [os.open(path, os.O_RDWR | os.O_CREAT, 0o600), 0]
        found[1] += 1
        return found[0]


def close_file(path: str) -> None:
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
