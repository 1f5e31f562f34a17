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
command gives up (docs/how-to/scaling.md has both).

PostgreSQL: a session advisory lock keyed by the context id; every insert tries the same key
shared inside the events table's insert function (adapters/storage/postgres.py) and is refused
while a holder has it; the holder writes on the connection that holds the lock.
SQLite: a one-byte POSIX record lock (adapters/storage/file_locks.py) in a file beside the database, at an offset given by the
context id, exclusive for the holder and tried shared around a racer's insert (a crashed
holder's lock goes with its process). memory://: one process, whose own lock per context suffices.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any
from uuid import UUID

ESCALATE_AFTER = 3  # races lost within one command before its writer takes a turn
CONTENDED_FOR = 1.0  # seconds a writer keeps taking turns on a context where others do
TURN_HELD = "another writer holds the turn of this context"  # a racer's insert refused at once
MOVED = "ctxstore: this context was moved to another server"  # the insert refuses it
MOVED_SQLSTATE = "CXM01"
# An append whose previous version is not there, or whose context's erasures are no longer
# what the writer read its state under: the context was erased (by this process or another,
# whose cache still held it), and maybe made again under its id. Class 23: the library
# raises an IntegrityError.
GONE = "ctxstore: this context's newest version is gone: it was erased"
GONE_SQLSTATE = "23G01"
TURN_HELD_SQLSTATE = "23T01"  # class 23: the library raises it as an IntegrityError
TURN_SETTING = "ctxstore.turn"  # PostgreSQL: the turn a session holds (its inserts go ahead)
WAIT = "30s"  # PostgreSQL: the longest a writer queues for a turn before it races again


def context_lock_key(cid: UUID) -> int:
    """The lock key of a context: the first 64 bits of its id, as a signed bigint (what the
    insert function computes from originator_id in SQL)."""
    return int.from_bytes(cid.bytes[:8], "big", signed=True)


@dataclass(frozen=True)
class Turn:
    """A held turn; on PostgreSQL, the connection that holds it (the write goes there)."""

    connection: Any = None


class Turns:
    """The contexts a store finds contended; each backend's subclass holds the turn locks
    (memory://: one process, whose own lock per context suffices)."""

    def __init__(self) -> None:
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
        """The backend's turn of a context (none here: one process's locks suffice)."""
        yield None

    def racing(self, cid: UUID) -> AbstractContextManager[None]:
        """Around a racer's insert: while another writer holds the context's turn, refuse
        it at once (IntegrityError naming TURN_HELD: the racer would lose; it takes a turn
        next). PostgreSQL's insert function refuses by itself."""
        return nullcontext()

    def close(self) -> None:
        """Release what the turns hold (SQLite: its lock file)."""


__all__ = [
    "CONTENDED_FOR", "ESCALATE_AFTER", "TURN_HELD", "TURN_HELD_SQLSTATE", "TURN_SETTING", "Turn",
    "Turns", "context_lock_key",
]  # fmt: skip
