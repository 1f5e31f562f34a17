"""What a failed insert means, decided once for both writers and free of I/O.

A write attempt's insert can fail in several ways, and what the writer must do next depends
on the failure and, for some, on whether the command's own events are stored after all (a
reply lost after the commit). That ladder is written here once, as a generator: it yields
`StoredBy` when it needs to know whether the command's first event was stored, receives the
answer, and returns what the writer does next (or raises the caller's error). The sync
writer answers by reading the store; the async writer by awaiting the same read on its
worker thread (the way psycopg's protocol generators are driven by a blocking and an
awaiting loop).

It is the one settle step of every write: the commands, a creation (and so a fork and an
imported transcript), an imported export and an erasure each drive it with their own answer
to "is what is stored there mine?", so a failure that may have come after the commit ends
as the stored result, a refusal of what is not stored, or OutcomeUnknownError, never as a
plain refusal of what may be stored.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from eventsourcing.persistence import IntegrityError

from ctxstore.adapters.storage.backend import driver_errors, earlier_tries, never_sent
from ctxstore.adapters.storage.turns import GONE, MOVED, TURN_HELD
from ctxstore.domain.errors import (
    ContextMovedError,
    OutcomeUnknownError,
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
    failure (named when the store cannot be read to tell). Not `reachable`: the last try
    waited in vain for a connection, and asking would wait once more; the outcome is then
    unknown without asking."""

    version: int
    cause: BaseException | None
    reachable: bool = True


Settle = Generator[StoredBy, bool, Next]


def reached(exc: BaseException) -> bool:
    """Whether a failed call may have reached the server (and so committed): not when none
    of its tries had a connection."""
    return not never_sent(exc) or any(reached(e) for e in earlier_tries(exc))


def settle(cid: UUID, before: int, exc: BaseException) -> Settle:
    """The writer's next step after its insert of versions before+1... failed with `exc`.

    Raises ContextMovedError (the context lives on another server now) or
    StoreUnavailableError (not stored).
    """
    asked = False  # whether the store was read after the last try
    if any(reached(e) for e in earlier_tries(exc)):
        # The recorder tried the call once more after a try that may have committed, its
        # reply lost: whatever the last try met (the events that try stored, another
        # writer's turn, no connection), its events are asked for first. A turn taken or
        # the command run again would apply it twice; a refusal would deny a stored write.
        if (yield StoredBy(before + 1, exc, reachable=not never_sent(exc))):
            return Next.STORED
        asked = True
    if GONE in str(exc):
        # Erased since the writer read it (and maybe made again under its id): run again
        # on the context as it is now, as a writer without a cache would; its read raises
        # ContextNotFoundError when none was made again.
        return Next.RETRY
    if isinstance(exc, IntegrityError):
        if TURN_HELD in str(exc):
            return Next.TAKE_TURN
        if not asked and (yield StoredBy(before + 1, None)):
            # Committed, its reply lost; the library's retry met the events it had stored.
            return Next.STORED
        # Another writer took the version: run again on fresh state, which judges
        # the caller's expected version (a racing usage record leaves the content as it was).
        return Next.RETRY
    if MOVED in str(exc):
        raise ContextMovedError(f"context {cid} was moved to another server") from exc
    if not asked and reached(exc) and (yield StoredBy(before + 1, exc)):
        return Next.STORED
    raise StoreUnavailableError(
        f"context {cid}: the write failed and was not stored ({exc})"
    ) from exc


def answered(cid: UUID, command: str, q: StoredBy, mine: Callable[[int], bool]) -> bool:
    """`mine(q.version)`: whether what the store holds is the write's named `command`;
    raises OutcomeUnknownError when the store cannot be read (or reached) to tell."""
    cause = q.cause
    if q.reachable:
        try:
            return mine(q.version)
        except driver_errors() as exc:
            cause = cause or exc
    raise OutcomeUnknownError(
        f"context {cid}: the write's outcome is unknown, the store cannot be read "
        f"({f'command {command}; ' if command else ''}{cause})",
        context_id=str(cid),
        command_id=command,
    ) from cause


def settled(
    cid: UUID, before: int, exc: BaseException, command: str, mine: Callable[[int], bool]
) -> Next:
    """`settle` driven by reading the store: `mine(version)` tells whether what is stored
    at a version is this write's (named `command`: a command's events carry it; an import
    is known by its states, an erasure by its record)."""
    return drive(settle(cid, before, exc), lambda q: answered(cid, command, q, mine))


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
