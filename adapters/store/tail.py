"""Following a context live: its events after a version, as they are written.

`follow` reads what is stored after the version given, then waits for a wake-up
(storage/notifications.py) and reads again: every event exactly once, in version order,
whatever the wake-ups (they carry nothing; the store is read). The HTTP service's
Server-Sent Events and `ctxstore tail` are made of the same reads.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from uuid import UUID

from ctxstore.adapters.storage.backend import driver_errors
from ctxstore.adapters.store.core import StoreCore
from ctxstore.domain.context import Context
from ctxstore.domain.errors import ContextNotFoundError, StoreUnavailableError, first_line
from ctxstore.projections.history import TailEvent, tail_event

PAGE = 500  # events read at a time
OUTAGE_WAIT = 1.0  # seconds between reads while the store does not answer
log = logging.getLogger(__name__)


def events_after(core: StoreCore, cid: UUID, after: int, limit: int = PAGE) -> list[TailEvent]:
    """The context's stored events after version `after` (at most `limit`); raises
    ContextNotFoundError when the context is gone (or never was)."""
    found = [
        tail_event(e)
        for e in core.storage.events.get(cid, gt=after, limit=limit)
        if isinstance(e, Context.Event)
    ]
    if not found and not core.exists(cid):
        raise ContextNotFoundError(f"no context with id {cid}")
    return found


def head_version(core: StoreCore, cid: UUID) -> int:
    """The context's newest stored version."""
    found = core.storage.recorder.select_events(cid, desc=True, limit=1)
    if not found:
        raise ContextNotFoundError(f"no context with id {cid}")
    return int(found[0].originator_version)


def follow(
    core: StoreCore, cid: UUID, after: int | None = None, *, idle: float | None = None,
    stop: threading.Event | None = None,
) -> Iterator[TailEvent]:  # fmt: skip
    """The context's events after `after` (default: its head, so only new ones), as they
    are written; ends when `stop` is set, after `idle` seconds without one, or (raising
    ContextNotFoundError) when the context is erased."""
    woken = threading.Event()
    hex_id = cid.hex
    unsubscribe = core.storage.notifications.subscribe(
        lambda h: woken.set() if h is None or h == hex_id else None, hex_id
    )
    outage = Outage(f"context {cid}", idle)
    failures: tuple[type[BaseException], ...] = (StoreUnavailableError, *driver_errors())
    try:
        at = head_version(core, cid) if after is None else after
        while stop is None or not stop.is_set():
            woken.clear()
            try:
                page = events_after(core, cid, at)
            except failures as exc:
                if core.closed or not outage.failed(exc):
                    raise
                time.sleep(OUTAGE_WAIT)
                continue
            outage.over()
            for event in page:
                yield event
                at = event.version
            if len(page) == PAGE:
                continue
            # Without a wake-up in 5 s, look anyway (another instance's erasure notifies none).
            if not woken.wait(idle if idle is not None else 5.0) and idle is not None:
                return
    finally:
        unsubscribe()


class Outage:
    """A follower riding through a store that stops answering (a restart, a failover): it
    reads again every OUTAGE_WAIT seconds from its last event (the caller waits, on a
    thread or on the loop), says so once and when it is over, and gives up after `idle`
    seconds (if given), as it would without events."""

    def __init__(self, what: str, idle: float | None = None) -> None:
        self.what, self.idle, self.since = what, idle, 0.0

    def failed(self, exc: BaseException) -> bool:
        """Whether to read again, after OUTAGE_WAIT seconds."""
        now = time.monotonic()
        if not self.since:
            self.since = now
            log.warning("following %s: the store does not answer (%s: %s); reading again "
                        "every %g s", self.what, type(exc).__name__, first_line(exc), OUTAGE_WAIT)  # fmt: skip
        return self.idle is None or now - self.since < self.idle

    def over(self) -> None:
        if self.since:
            log.warning("following %s: the store answers again after %.1f s", self.what,
                        time.monotonic() - self.since)  # fmt: skip
            self.since = 0.0
