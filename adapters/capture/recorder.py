"""Recording captured calls off the application's path: a bounded queue and one background
writer per store, flushed at exit within a bound.

Capture runs inside other people's applications, so it never raises into them and never
makes them wait on the store: `submit` only enqueues (a full queue drops the call and counts
it); the writer records each call, trying again after a store outage with the same
`call_id` (a recording whose reply was lost is not recorded twice); a call the store refuses
is logged and counted. Everything goes to the `ctxstore.capture` logger.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import threading
import time
import weakref
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from ctxstore.adapters.integrations.surface import faces
from ctxstore.domain.captured import CapturedCall
from ctxstore.domain.errors import CtxStoreError, StoreUnavailableError

log = logging.getLogger("ctxstore.capture")

QUEUE = int(os.environ.get("CTXSTORE_CAPTURE_QUEUE", "10000"))  # calls waiting at most
FLUSH_SECONDS = float(os.environ.get("CTXSTORE_CAPTURE_FLUSH_SECONDS", "5"))  # at exit
BACKOFF = (0.2, 0.5, 1.0, 2.0, 5.0)  # seconds between tries while the store is down
TRIES = 8  # a call is given up (and counted) after this many outages

# Where a call goes: a context id, a key (`context_for_key`), or what finds one when called.
Target = UUID | str | Callable[[], UUID | str]


@dataclass
class CaptureStats:
    """What a recorder did: calls submitted, recorded, dropped for a full queue, and given
    up (refused by the store, or still failing after every try)."""

    submitted: int = 0
    recorded: int = 0
    dropped: int = 0
    failed: int = 0
    last_error: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def count(self, name: str, error: str | None = None) -> None:
        with self.lock:
            setattr(self, name, getattr(self, name) + 1)
            if error is not None:
                self.last_error = error


class CallRecorder:
    """Records captured calls into one store (any face: the store, the async store, the
    HTTP client, the sharded store) from a background thread."""

    def __init__(self, store: Any, *, maxsize: int = QUEUE) -> None:
        self.store = faces(store)[0]  # an async store's sync twin: the writer is a thread
        self.stats = CaptureStats()
        self._queue: queue.Queue[tuple[Target, CapturedCall] | None] = queue.Queue(maxsize)
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._idle = threading.Condition()
        self._busy = 0  # calls taken from the queue and not yet settled
        self._closed = False
        self._stop = threading.Event()  # cuts a wait between tries short at close

    def submit(self, target: Target, call: CapturedCall) -> None:
        """Queue a call for recording; never raises, never blocks."""
        try:
            self.stats.count("submitted")
            if self._closed:
                self.stats.count("dropped")
                return
            self._start()
            with self._idle:
                self._busy += 1
            try:
                self._queue.put_nowait((target, call))
            except queue.Full:
                with self._idle:
                    self._busy -= 1
                    self._idle.notify_all()
                self.stats.count("dropped")
                if self.stats.dropped in (1, 10, 100) or self.stats.dropped % 1000 == 0:
                    log.warning(
                        "capture queue full (%d calls): %d call(s) dropped so far",
                        self._queue.maxsize, self.stats.dropped,
                    )  # fmt: skip
        except Exception:  # capture must never break the application
            log.exception("capture: a call could not be queued")

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued call is recorded or given up (at most `timeout` s);
        whether none is left."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._idle:
            while self._busy:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._idle.wait(left)
        return True

    def close(self, timeout: float = FLUSH_SECONDS) -> None:
        """Flush within `timeout`, then stop: the calls still queued are given up (logged
        and counted); one being written when time runs out is counted when it ends."""
        if self._closed:
            return
        done = self.flush(timeout)
        self._closed = True
        self._stop.set()
        left = 0
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                left += 1
        if left:
            with self._idle:
                self._busy -= left
                self._idle.notify_all()
            with self.stats.lock:
                self.stats.failed += left
        if not done:
            log.warning("capture: %d call(s) not recorded at close (the store: %s)", left,
                        self.stats.last_error or "slow")  # fmt: skip
        self._queue.put(None)  # the writer stops once its call in hand is done

    # ---- the writer --------------------------------------------------------------------

    def _start(self) -> None:
        if self._thread is not None:
            return
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="ctxstore-capture", daemon=True
                )
                self._thread.start()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            try:
                self._record(*item)
            except Exception as exc:  # noqa: BLE001 - logged and counted, never raised
                self.stats.count("failed", f"{type(exc).__name__}: {exc}")
                log.warning("capture: a call was not recorded: %s: %s", type(exc).__name__, exc)
            finally:
                with self._idle:
                    self._busy -= 1
                    self._idle.notify_all()

    def _record(self, target: Target, call: CapturedCall) -> None:
        for attempt in range(TRIES):
            try:
                cid = self._resolve(target)
                self.store.record_call(cid, call)
                self.stats.count("recorded")
                return
            except StoreUnavailableError as exc:  # OutcomeUnknownError too: the id settles it
                why = f"{type(exc).__name__}: {exc}"
                if attempt == TRIES - 1 or self._closed:
                    raise
                if attempt == 0:
                    log.warning("capture: the store is unavailable, trying again: %s", why)
                self.stats.last_error = why
                self._stop.wait(BACKOFF[min(attempt, len(BACKOFF) - 1)])
            except CtxStoreError as exc:
                self.stats.count("failed", f"{type(exc).__name__}: {exc}")
                log.warning("capture: the store refused a call: %s: %s", type(exc).__name__, exc)
                return

    def _resolve(self, target: Target) -> UUID | str:
        found = target() if callable(target) else target
        if isinstance(found, str):
            try:
                return UUID(found)
            except ValueError:
                return self.store.context_for_key(found)
        return found


_recorders: dict[int, tuple[Any, CallRecorder]] = {}
_lock = threading.Lock()
# What each closed store's recorder did, kept after the recorder (and the store) are let
# go: `ctxstore.capture.stats` still says what a close gave up. Keyed by the store, weakly.
_closed_stats: weakref.WeakKeyDictionary[Any, CaptureStats] = weakref.WeakKeyDictionary()


def recorder_for(store: Any) -> CallRecorder:
    """The one recorder of this store (made on first use; flushed at exit)."""
    key = id(faces(store)[0])
    with _lock:
        found = _recorders.get(key)
        if found is None or found[1]._closed:
            found = (store, CallRecorder(store))  # (holding the store keeps its id its own)
            _recorders[key] = found
        return found[1]


def stats_for(store: Any) -> CaptureStats:
    """What capture did for this store: its recorder's figures, a closed one's too (none
    is made here)."""
    face = faces(store)[0]
    with _lock:
        found = _recorders.get(id(face))
        if found is not None:
            return found[1].stats
    with suppress(TypeError):  # (a surface that takes no weak reference)
        kept = _closed_stats.get(face)
        if kept is not None:
            return kept
    return CaptureStats()


def close_recorder(store: Any, timeout: float = FLUSH_SECONDS) -> None:
    """Record what was captured for this store (within `timeout`) and stop its recorder,
    if it has one: a store closes only after its captured calls (none is made here)."""
    with _lock:
        found = _recorders.pop(id(store), None)
    if found is not None:
        found[1].close(timeout)
        with suppress(TypeError):
            _closed_stats[store] = found[1].stats


@atexit.register
def _flush_all() -> None:
    with _lock:
        recorders = [r for _, r in _recorders.values()]
    deadline = time.monotonic() + FLUSH_SECONDS
    for r in recorders:
        r.close(max(0.0, deadline - time.monotonic()))
