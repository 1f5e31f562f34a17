"""What a failed insert means, decided once for both writers and free of I/O.

A write attempt's insert can fail in several ways, and what the writer must do next depends
on the failure and, for some, on whether the command's own events are stored after all (a
reply lost after the commit). That ladder is written here once, as a generator: it yields
`StoredBy` when it needs to know whether the command's first event was stored, receives the
answer, and returns what the writer does next (or raises the caller's error). The sync
writer answers by reading the store; the async writer by awaiting the same read on its
worker thread (the way psycopg's protocol generators are driven by a blocking and an
awaiting loop).
"""

from __future__ import annotations

import enum
import os
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from eventsourcing.persistence import IntegrityError

from ctxstore.adapters.storage.turns import GONE, MOVED, TURN_HELD
from ctxstore.domain.errors import (
    ContextMovedError,
    StoreUnavailableError,
)


def new_command_id() -> str:
    """A command's id, stored in each of its events (how a writer whose reply was lost finds
    them): 128 random bits as hex, as uuid4().hex gives, without building a UUID object
    (a quarter of the time, on every command)."""
    return os.urandom(16).hex()


class Next(enum.Enum):
    """What the writer does after a failed insert."""

    STORED = "stored"  # the command's events are stored: its reply alone was lost
    RETRY = "retry"  # another writer stored that version first: run the command again
    TAKE_TURN = "take_turn"  # another writer holds the context's turn: queue for it


@dataclass(frozen=True)
class StoredBy:
    """A question to the driver: is the event at `version` this command's? `cause` is the
    failure (a connection never had stores nothing)."""

    version: int
    cause: BaseException | None


Settle = Generator[StoredBy, bool, Next]


def settle(cid: UUID, before: int, exc: BaseException) -> Settle:
    """The writer's next step after its insert of versions before+1... failed with `exc`.

    Raises ContextMovedError (the context lives on another server now) or
    StoreUnavailableError (not stored).
    """
    if GONE in str(exc):
        # Erased since the writer read it (and maybe made again under its id): run again
        # on the context as it is now, as a writer without a cache would; its read raises
        # ContextNotFoundError when none was made again.
        return Next.RETRY
    if isinstance(exc, IntegrityError):
        if TURN_HELD in str(exc):
            return Next.TAKE_TURN
        if (yield StoredBy(before + 1, None)):
            # Committed, its reply lost; the library's retry met the events it had stored.
            return Next.STORED
        # Another writer took the version: run again on fresh state, which judges
        # the caller's expected version (a racing usage record leaves the content as it was).
        return Next.RETRY
    if MOVED in str(exc):
        raise ContextMovedError(f"context {cid} was moved to another server") from exc
    if not (yield StoredBy(before + 1, exc)):
        raise StoreUnavailableError(
            f"context {cid}: the write failed and was not stored ({exc})"
        ) from exc
    return Next.STORED


def drive(steps: Settle, answer: Any) -> Next:
    """Run `steps` to its end, answering each question with `answer(question)`."""
    try:
        question = next(steps)
        while True:
            question = steps.send(answer(question))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def drive_async(steps: Settle, answer: Any) -> Next:
    """Run `steps` to its end, answering each question with `await answer(question)`."""
    try:
        question = next(steps)
        while True:
            question = steps.send(await answer(question))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
