"""One bounded cache of what a store keeps in memory per context.

Everything held for a context lives in one `Held` record — the aggregate, this process's
lock on it, the chain of its newest event, its validated messages, its grouped prompt units
and its token-series fold — so evicting a context drops all of it at once and a long-running
service holds at most `size` of them (CTXSTORE_CACHE_SIZE). A context whose lock is held is
never evicted: the thread holding it keeps working on the record it locked. Tenants are kept
apart, in a larger bound: they never change, are tiny, and the audit index asks for one per
event it indexes.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from uuid import UUID

from ctxstore.domain.context import Context
from ctxstore.domain.prompt import PromptItem, PromptUnits
from ctxstore.projections.tokens import Folded

TENANTS = 100_000  # contexts whose tenant a store remembers
UNKNOWN = object()  # a tenant not remembered (None is a context without tenant)


@dataclass(eq=False)
class Held:
    """What the store keeps for one context; `lock` is held around every command on it."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    ctx: Context | None = None  # the aggregate at the newest version this process saw
    chain: tuple[int, str] | None = None  # (version, chain of the event at that version)
    # How many times the context had been erased when `ctx` was read (storage/backend.py
    # erasures_of): appends from that state are stored only while the count holds.
    erasures: int | None = None
    # Validated messages by id: (the version of the entry they were read from, the item).
    parsed: dict[str, tuple[int, PromptItem]] = field(default_factory=dict)
    units: tuple[int, PromptUnits] | None = None  # grouped prompt units, at a version
    series: Folded | None = None  # the token series folded so far
    series_lock: threading.Lock = field(default_factory=threading.Lock)

    def stale(self) -> None:
        """Drop the state that may be ahead of or behind storage (after a failed write)."""
        self.ctx = None
        self.chain = None


class ContextCache:
    """Least recently used contexts, at most `size` of them (more only while all are locked)."""

    def __init__(self, size: int) -> None:
        self.size = max(1, size)
        self._held: OrderedDict[UUID, Held] = OrderedDict()
        self._tenants: OrderedDict[UUID, str | None] = OrderedDict()
        self._guard = threading.Lock()

    def __len__(self) -> int:
        return len(self._held)

    def held(self, cid: UUID) -> Held:
        """The record of a context (made empty on first use), now the most recently used."""
        with self._guard:
            found = self._held.get(cid)
            if found is not None:
                self._held.move_to_end(cid)
                return found
            found = self._held[cid] = Held()
            if len(self._held) > self.size:
                self._evict()
            return found

    def _evict(self) -> None:
        for cid, held in self._held.items():  # oldest first
            if not held.lock.locked() and not held.series_lock.locked():
                del self._held[cid]
                return

    def peek(self, cid: UUID) -> Held | None:
        """The record of a context if one is kept, without making it recent."""
        return self._held.get(cid)

    def drop(self, cid: UUID) -> None:
        """Forget everything kept about a context (it was erased)."""
        with self._guard:
            self._held.pop(cid, None)
            self._tenants.pop(cid, None)

    def tenant(self, cid: UUID) -> object:
        """The remembered tenant of a context (a str or None), or UNKNOWN."""
        return self._tenants.get(cid, UNKNOWN)

    def remember_tenant(self, cid: UUID, tenant: str | None) -> str | None:
        with self._guard:
            self._tenants[cid] = tenant
            if len(self._tenants) > TENANTS:
                self._tenants.popitem(last=False)
        return tenant
