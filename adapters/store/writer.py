"""The writer: the one path from a command to stored events.

Writes use the cached aggregate without re-reading the database first: a racing writer
elsewhere makes the insert fail on the (context, version) key, and the command is then
retried on fresh state (or reported, when the caller named a version). Each new event is
sealed with its link in the context's hash chain, and the snapshot policy runs after it.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast
from uuid import UUID

from ctxstore.adapters.storage.backend import driver_errors
from ctxstore.adapters.storage.codec.chain import GENESIS, anchor, command_of, unseal
from ctxstore.adapters.storage.snapshot_policy import held_messages, prune_superseded
from ctxstore.adapters.storage.snapshot_policy import step as snapshot_step
from ctxstore.adapters.storage.turns import Turn
from ctxstore.adapters.store.cache import Held
from ctxstore.adapters.store.core import StoreCore
from ctxstore.adapters.store.results import Written
from ctxstore.adapters.store.write_attempt import (
    Next,
    StoredBy,
    answered,
    drive,
    new_command_id,
    settle,
)
from ctxstore.domain.context import Context
from ctxstore.domain.errors import (
    ContextExistsError,
    ContextNotFoundError,
    CtxStoreError,
    VersionConflictError,
)
from ctxstore.domain.limits import check_int
from ctxstore.domain.tokens import REPLY_PRIMING

if TYPE_CHECKING:
    from ctxstore.adapters.storage.postgres_recorder import OrderedPostgresRecorder

log = logging.getLogger(__name__)
MAX_ATTEMPTS = 50  # a command retried this often against racing writers gives up

Command = Callable[[Context], list[str] | str | int | None]


class Writer:
    """Turns commands into stored events for one store."""

    def __init__(self, core: StoreCore) -> None:
        self.core = core
        self.storage = core.storage

    def create(self, ctx: Context) -> None:
        """Store a new context's first events; raises ContextExistsError if its id is taken
        (by another command: a creation whose reply was lost finds its own event)."""
        command_id = new_command_id()
        try:
            self.store_pending(ctx, command_id)
        except driver_errors() as exc:
            if self.settled(ctx.id, 0, exc, command_id) is not Next.STORED:
                raise ContextExistsError(f"context {ctx.id} already exists") from None
            self.core.cache.held(ctx.id).ctx = ctx  # stored: the reply alone was lost

    def command(self, context_id: Any, expected_version: int | None, command: Command) -> Written:
        """Run one aggregate command and store its events; the command returns the ids it
        touched (a list or one id) or anything else when it touched none (a batch number)."""
        cid = self.core.id(context_id)
        if expected_version is not None:
            check_int(expected_version, "expected_version")
        turns = self.storage.turns
        command_id = new_command_id()  # in every event it stores: its own, if a reply is lost
        refused = False  # another writer holds the turn: take one rather than race again
        for attempt in range(MAX_ATTEMPTS):
            if attempt and not refused:
                # Lost a race: wait a random, growing moment, so that writers racing on one
                # context stop colliding in lockstep (none starves).
                time.sleep(random.uniform(0, min(0.05, 0.0005 * 2**attempt)))
            held = self.core.cache.held(cid)
            wanted = turns.wanted(cid, attempt, refused)
            if wanted:
                # Load the context before queueing: turns pass quickly when the holder only
                # catches up with the newest events.
                with held.lock:
                    self.core.cached_or_loaded(cid, held)
            stored: Written | None = None  # set at the commit point: from there, success
            try:
                with held.lock, turns.turn(cid, wanted) as turn:
                    stored, refused = self._attempt(
                        cid, held, turn, expected_version, command, command_id
                    )
                    if stored is not None:
                        return stored
            except driver_errors() as exc:
                if stored is None:
                    raise
                # Releasing the turn failed after the commit (the connection died with the
                # session, and its lock with it): the command is stored all the same.
                log.warning("context %s: stored; releasing its turn failed: %s", cid, exc)
                return stored
        raise VersionConflictError(f"context {cid}: gave up after {MAX_ATTEMPTS} racing writes")

    def _attempt(
        self, cid: UUID, held: Held, turn: Turn | None, expected_version: int | None,
        command: Command, command_id: str,
    ) -> tuple[Written | None, bool]:  # fmt: skip
        """One try under the context's lock: (what it wrote, False), or (None, whether
        another writer holds the turn) when the command must run again."""
        turns = self.storage.turns
        if turn is not None:
            # Holding the context's turn: read what others stored; the write follows.
            ctx, fresh = self.core.fresh(cid, held), True
            if ctx.version > (held.chain or (0, ""))[0]:
                turns.saw_others(cid)  # others still write here: keep queueing
        else:
            ctx, fresh = self.core.cached_or_loaded(cid, held)
        if (
            expected_version is not None
            and not ctx.at_content_version(expected_version)
            and not fresh
        ):
            ctx, fresh = self.core.fresh(cid, held), True
        if expected_version is not None and not ctx.at_content_version(expected_version):
            raise VersionConflictError(
                f"context {cid} is at version {ctx.version}, not {expected_version}"
            )
        before = ctx.version
        try:
            self.core.retention.check(ctx)  # an expired context takes no writes
            touched = command(ctx)
        except CtxStoreError:
            held.stale()
            if fresh:
                raise
            return None, False  # the refusal may come from a stale cache: judge on fresh state
        except BaseException:
            held.stale()
            raise
        events = ctx.collect_events()
        try:
            self.put(held, cid, before, events, turn, command_id)
        except driver_errors() as exc:
            held.stale()
            after = self.settled(cid, before, exc, command_id)
            if after is Next.TAKE_TURN:
                turns.saw_others(cid)
                return None, True
            if after is Next.RETRY:
                return None, False
            held.ctx = ctx  # stored: the reply alone was lost
        except BaseException:
            held.stale()
            raise
        self.maybe_snapshot(ctx, before)
        return written_of(cid, ctx, touched), False

    def put(
        self, held: Held, cid: Any, before: int, events: Sequence[Any], turn: Turn | None = None,
        command: str | None = None,
    ) -> None:  # fmt: skip
        """Store a context's new events (versions before+1, ...), each chained to the last;
        a writer holding the context's turn writes where it holds it.

        Raises the library's IntegrityError when another writer stored version before+1, or
        (naming TURN_HELD) when another writer holds the context's turn.
        """
        if not events:
            return
        stored, head = self.storage.mapper.to_sealed_events(
            events, self.chain_head(held, cid, before), command
        )
        recorder = self.storage.recorder
        if before == 0:  # a creation: appends after it hold while its erasures stay these
            held.erasures = self.storage.erasures_of(cid)
        erasures = held.erasures if before else None
        if turn is not None and turn.connection is not None:
            cast("OrderedPostgresRecorder", recorder).insert_events_on(
                turn.connection, stored, erasures
            )
        elif turn is not None:
            recorder.insert_events(stored, erasures=erasures)
        else:
            with self.storage.turns.racing(cid):
                recorder.insert_events(stored, erasures=erasures)
        held.chain = (before + len(stored), head)
        self.core.written.wrote(cid, before + len(stored))
        self.storage.notifications.publish(cid.hex)  # this process's live tails, at once

    def settled(self, cid: UUID, before: int, exc: BaseException, command: str) -> Next:
        """The settle step (write_attempt.settle) of a command whose write of versions
        before+1... failed with `exc`, answered by reading the store for its command id."""
        return drive(settle(cid, before, exc), lambda q: self.stored_by(cid, command, q))

    def stored_by(self, cid: UUID, command: str, q: StoredBy) -> bool:
        """Whether the event at `q.version` was stored by `command` (a write whose reply
        was lost). Raises OutcomeUnknownError when the store cannot be read to tell."""
        return answered(cid, command, q, lambda v: self.command_at(cid, v) == command)

    def command_at(self, cid: Any, version: int) -> str | None:
        """The id of the command that stored a context's event at `version` (None: no
        event there, or one stored without)."""
        found = self.storage.recorder.select_events(cid, gt=version - 1, lte=version, limit=1)
        if not found:
            return None
        return command_of(unseal(self.storage.mapper.plaintext(found[0].state, cid))[0])

    def chain_head(self, held: Held, cid: Any, version: int) -> str:
        """The chain of the context's event at `version` (what the next event links to)."""
        if version == 0:
            return GENESIS
        if held.chain is not None and held.chain[0] == version:
            return held.chain[1]
        found = self.storage.recorder.select_events(cid, gt=version - 1, lte=version, limit=1)
        if not found:
            raise ContextNotFoundError(f"context {cid} has no event at version {version}")
        plain = self.storage.mapper.plaintext(found[0].state, cid)
        chain = unseal(plain)[1]
        return anchor(plain) if chain is None else chain

    def snapshot_due(self, ctx: Context, before: int) -> bool:
        """Whether the version crossed a multiple of the step (storage/snapshot_policy.py)."""
        every = snapshot_step(self.core.settings.snapshot_interval, held_messages(ctx))
        return ctx.version // every > before // every

    def maybe_snapshot(self, ctx: Context, before: int) -> None:
        """Snapshot when the version crosses a multiple of the step (storage/snapshot_policy.py),
        then delete the older snapshot the new one makes redundant, if any."""
        if not self.snapshot_due(ctx, before):
            return
        held = held_messages(ctx)
        snapshots = self.storage.snapshots
        try:
            snapshots.put([Context.Snapshot.take(ctx)])
            origin = self.core.bounds.of(
                ctx.id, fresh=True
            )  # (another process may have bounded it)
            prune_superseded(
                self.storage.backend, snapshots.recorder, ctx.id, ctx.version, held,
                origin=None if origin is None else origin.version,
            )  # fmt: skip
        except driver_errors():
            # The command's event is stored; a missing snapshot only costs read time.
            log.warning(
                "snapshot of context %s at version %d (or deleting the one it supersedes) failed",
                ctx.id,
                ctx.version,
                exc_info=True,
            )

    def store_pending(self, ctx: Context, command: str | None = None) -> None:
        """Store every event an aggregate has pending, chained, in one transaction, then
        apply the snapshot policy (tools that build large contexts fast)."""
        events = ctx.collect_events()
        if not events:
            return
        before = events[0].originator_version - 1
        held = self.core.cache.held(ctx.id)
        with held.lock:
            self.put(held, ctx.id, before, events, command=command)
            held.ctx = ctx
        self.maybe_snapshot(ctx, before)

    def store_new(self, ctx: Context) -> None:
        """Store every event of a context not stored before, in one transaction."""
        self.create(ctx)

    def remember_import(self, ctx: Context, chain: str) -> None:
        """Note a context whose events an import stored, with its last chain."""
        held = self.core.cache.held(ctx.id)
        try:
            erasures = self.storage.erasures_of(ctx.id)
        except driver_errors():
            # The import is stored: what this process keeps of it is read again when needed.
            log.warning("context %s: imported; noting it failed", ctx.id, exc_info=True)
            held.stale()
            return
        held.chain = (ctx.version, chain)
        held.ctx, held.erasures = ctx, erasures
        self.maybe_snapshot(ctx, 0)


def written_of(cid: UUID, ctx: Context, touched: list[str] | str | int | None) -> Written:
    """What a command wrote: the ids it touched (a list or one id; none for a batch
    number), the context's new version, batch, size."""
    ids = touched if isinstance(touched, list) else [touched] if isinstance(touched, str) else []
    return Written(
        context_id=cid, version=ctx.version, batch=ctx.batch, ids=ids,
        tokens=ctx.tokens + REPLY_PRIMING, messages=len(ctx.order),
    )  # fmt: skip
