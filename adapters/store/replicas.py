"""Reads from streaming replicas, writes to the primary, and a client that reads its own
writes.

A store opened with replicas (`ctxstore.open(url, replicas=[...])`, CTXSTORE_REPLICAS)
keeps one read-only storage per replica beside the primary's. Commands, and the head read
inside each command, always go to the primary. Reads that only look (audit pages,
history, diff, replay, model calls, token series, exports, `visible` at the head or a
version, verify) go to a replica, taken in turn, when it has what this store knows was
written:

- a context read: the replica's head version of the context is at least the newest version
  this store wrote to it (remembered per context for the most recent contexts written);
- an audit page: the index is brought up to date on the primary (it is written there),
  and the replica's index has reached that position.

A replica that is behind is waited for up to `replica_wait` seconds (CTXSTORE_REPLICA_WAIT,
default 0: not at all), then the primary answers. A replica that fails (stopped, refusing
connections, in the middle of a read) is left alone for RETRY_AFTER seconds and the
primary answers meanwhile. What other clients wrote reaches a replica when it replays it:
streaming replication is asynchronous, so a read on a replica may not show another
client's newest write (pass `replicas=[]` to read everything from the primary).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar
from uuid import UUID

from ctxstore.adapters.settings import Settings
from ctxstore.adapters.storage.backend import driver_errors
from ctxstore.adapters.storage.events import EventStorage
from ctxstore.adapters.store import audit
from ctxstore.adapters.store.core import StoreCore
from ctxstore.domain.errors import ContextNotFoundError, StoreUnavailableError

log = logging.getLogger(__name__)
T = TypeVar("T")
RETRY_AFTER = 5.0  # seconds a failed replica is left alone
POLL = 0.005  # seconds between looks at a replica that is behind


def _indexed(core: StoreCore, position: int) -> bool:
    """Whether a replica's audit index has reached `position`."""
    return core.storage.audit_index.position() >= position


def _faults() -> tuple[type[BaseException], ...]:
    """What a failing replica raises: the driver's errors, or ours wrapping them."""
    return (StoreUnavailableError, *driver_errors())


class Replicas:
    """The primary's core and the replicas' cores (each opened when first needed), and
    which one answers a read."""

    def __init__(
        self, primary: StoreCore, urls: list[str], settings: Settings, wait: float
    ) -> None:
        self.primary = primary
        self.urls = urls
        self.settings = settings
        self.wait = wait
        self._cores: dict[int, StoreCore] = {}
        self._turn = 0
        self._failed: dict[int, float] = {}  # replica -> when it may be tried again
        self._lock = threading.Lock()
        self.served = {"replica": 0, "primary": 0}  # reads answered by each (tests, bench)

    def _core(self, i: int) -> StoreCore:
        """Replica i's core, opened read-only on first use; raises StoreUnavailableError."""
        with self._lock:
            core = self._cores.get(i)
            if core is None:
                storage = EventStorage.open(
                    self.urls[i], self.settings, migrate=False, read_only=True
                )
                core = self._cores[i] = StoreCore(storage, self.settings, self.urls[i])
            return core

    def _candidates(self) -> list[int]:
        now = time.monotonic()
        with self._lock:
            self._turn += 1
            order = [(self._turn + i) % len(self.urls) for i in range(len(self.urls))]
            return [i for i in order if self._failed.get(i, 0) <= now]

    def _failed_now(self, i: int, exc: BaseException) -> None:
        log.warning("replica %d failed (%s); reading from the primary for %.0f s", i, exc,
                    RETRY_AFTER)  # fmt: skip
        with self._lock:
            self._failed[i] = time.monotonic() + RETRY_AFTER

    def read(self, cid: UUID | None, read: Callable[[StoreCore], T]) -> T:
        """`read` on a replica that has this store's writes to `cid` (any, without one),
        else on the primary."""
        known = None if cid is None else self.primary.written.get(cid)
        for i in self._candidates():
            try:
                core = self._core(i)
                if known is not None and not self._has(core, cid, known):
                    continue
                result = read(core)
            except _faults() as exc:
                self._failed_now(i, exc)
                continue
            except ContextNotFoundError:
                if known is not None or not self._on_primary(cid):
                    raise
                continue  # created on the primary by another client, not replayed yet
            self.served["replica"] += 1
            return result
        self.served["primary"] += 1
        return read(self.primary)

    def audit(self, read: Callable[[StoreCore], T]) -> T:
        """An audit read: the index brought up to date on the primary, then read from a
        replica whose index has reached the same position."""
        reached = audit.catch_up(self.primary)
        for i in self._candidates():
            try:
                core = self._core(i)
                if not self._until(functools.partial(_indexed, core, reached)):
                    continue
                result = read(core)
            except _faults() as exc:
                self._failed_now(i, exc)
                continue
            self.served["replica"] += 1
            return result
        self.served["primary"] += 1
        return read(self.primary)

    def _has(self, core: StoreCore, cid: UUID | None, version: int) -> bool:
        """Whether the replica's head of `cid` is at `version` or later (waiting for it up
        to `wait` seconds)."""
        assert cid is not None

        def head() -> int:
            found = core.storage.recorder.select_events(cid, desc=True, limit=1)
            return int(found[0].originator_version) if found else 0

        return self._until(lambda: head() >= version)

    def _until(self, caught_up: Callable[[], bool]) -> bool:
        deadline = time.monotonic() + self.wait
        while True:
            try:
                if caught_up():
                    return True
            except driver_errors() as exc:
                raise StoreUnavailableError(f"the replica cannot be read: {exc}") from exc
            if time.monotonic() >= deadline:
                return False
            time.sleep(POLL)

    def _on_primary(self, cid: UUID | None) -> bool:
        return cid is not None and self.primary.exists(cid)

    def close(self) -> None:
        with self._lock:
            for core in self._cores.values():
                core.storage.close()
            self._cores.clear()
