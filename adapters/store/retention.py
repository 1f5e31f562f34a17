"""Retention: contexts expire after a period without writes.

A policy applies to one context, to a tenant's contexts, or to every context of the store;
the most specific wins. A context whose last write is older than its policy allows is
expired: from that moment no read or write serves it (it answers as a context that does
not exist), and the next sweep erases it — with the erasure record every erasure leaves,
actor `ctxstore:retention` and the policy as its reason (crypto-shredded when the store has
keys). Each sweep is recorded (`ctxstore_sweeps`: when, by whom, what it expired), and
`ctxstore serve` sweeps in the background (CTXSTORE_SERVICE__SWEEP_SECONDS).

Policies are read from the database at most every `REFRESH` seconds per process.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict

from ctxstore.domain.errors import ContextNotFoundError, InvalidOperationError

if TYPE_CHECKING:
    from ctxstore.adapters.store.core import StoreCore

REFRESH = 5.0
TRIM_SLACK = 16  # events past the bound before a trim is worth its snapshot
ACTOR = "ctxstore:retention"
STORE = "store"


class RetentionPolicy(BaseModel):
    """Expire contexts after `expire_after` seconds without a write; keep only the latest
    `keep_latest` events of each (adapters/store/history_bound.py). Either may be None."""

    model_config = ConfigDict(frozen=True)

    scope: str  # "store", "tenant:<name>" ("tenant:" for contexts without one), "context:<id>"
    expire_after: float | None
    keep_latest: int | None = None
    set_at: datetime
    actor: str


class Sweep(BaseModel):
    """What one sweep did."""

    model_config = ConfigDict(frozen=True)

    id: str
    started: datetime
    finished: datetime
    actor: str
    expired: list[UUID]
    trimmed: dict[str, int] = {}  # context id -> events removed (keep_latest)
    failed: dict[str, str] = {}  # context id -> why it could not be done (tried again later)


class PlannedExpiry(BaseModel):
    """A context the next sweep erases: no writes since `last_write`."""

    model_config = ConfigDict(frozen=True)

    context_id: UUID
    policy: str  # the scope of the policy that expires it
    last_write: datetime
    events: int  # every event of the context goes (its erasure record stays)


class PlannedBound(BaseModel):
    """A context whose history the next sweep bounds to its latest `keep_latest` events."""

    model_config = ConfigDict(frozen=True)

    context_id: UUID
    policy: str
    keep_latest: int
    events_removed: int
    versions_lost: tuple[int, int]  # first and last version no longer readable afterwards
    readable_from: int  # afterwards: version 1 and this one on


class RetentionPlan(BaseModel):
    """What a sweep would remove now, per context: erasures and history bounds."""

    model_config = ConfigDict(frozen=True)

    expire: list[PlannedExpiry] = []
    bound: list[PlannedBound] = []

    def empty(self) -> bool:
        return not self.expire and not self.bound

    def under(self, scope: str) -> RetentionPlan:
        """Only what the policy at `scope` would remove."""
        return RetentionPlan(
            expire=[e for e in self.expire if e.policy == scope],
            bound=[b for b in self.bound if b.policy == scope],
        )

    def merged(self, other: RetentionPlan) -> RetentionPlan:
        return RetentionPlan(expire=self.expire + other.expire, bound=self.bound + other.bound)

    def summary(self) -> str:
        """One line: "erase 2 context(s) (40 events), bound 1 (17 events removed)"."""
        erased = sum(e.events for e in self.expire)
        removed = sum(b.events_removed for b in self.bound)
        return (
            f"erase {len(self.expire)} context(s) ({erased} events), "
            f"bound {len(self.bound)} ({removed} events removed)"
        )

    def lines(self) -> list[str]:
        """One line per context, saying what goes."""
        said = [
            f"erase {e.context_id}: all {e.events} events (no writes since "
            f"{e.last_write:%Y-%m-%d %H:%M:%S} UTC; policy {e.policy})"
            for e in self.expire
        ]
        said += [
            f"bound {b.context_id}: remove {b.events_removed} events, versions "
            f"{b.versions_lost[0]}..{b.versions_lost[1]} no longer readable (version 1 and "
            f"{b.readable_from} on stay; keep the latest {b.keep_latest}, policy {b.policy})"
            for b in self.bound
        ]
        return said


def scope_of(
    *, tenant: str | None = None, context_id: UUID | None = None, everything: bool = False
) -> str:
    named = sum(x for x in (tenant is not None, context_id is not None, everything))
    if named != 1:
        raise InvalidOperationError(
            "a retention policy applies to exactly one scope: one context (--context ID, "
            "context_id=), one tenant (--tenant NAME, tenant=) or the whole store (--all, "
            "everything=True)"
        )
    if context_id is not None:
        return f"context:{context_id.hex}"
    if tenant is not None:
        return f"tenant:{tenant}"
    return STORE


class Retention:
    """One store's policies, cached, and the check every read and write passes."""

    def __init__(self, core: StoreCore) -> None:
        self.core = core
        self.rows = core.storage.retention
        self._policies: dict[str, RetentionPolicy] = {}
        self._read_at = -REFRESH
        self._lock = threading.Lock()
        self.clock: Callable[[], float] = time.time  # seconds since the epoch (tests move it)

    def policies(self, *, fresh: bool = False) -> dict[str, RetentionPolicy]:
        if self.rows is None:
            return {}
        now = time.monotonic()
        with self._lock:
            if fresh or now - self._read_at >= REFRESH:
                self._policies = {
                    scope: RetentionPolicy(
                        scope=scope,
                        expire_after=after,
                        keep_latest=keep,
                        set_at=datetime.fromtimestamp(at, UTC),
                        actor=actor,
                    )
                    for scope, after, keep, at, actor in self.rows.policies()
                }
                self._read_at = now
            return self._policies

    def set(
        self, scope: str, expire_after: float | None, keep_latest: int | None, actor: str
    ) -> None:
        if self.rows is None:
            raise InvalidOperationError("retention needs a SQLite or PostgreSQL store")
        if expire_after is not None and not expire_after > 0:
            raise InvalidOperationError(
                f"expire_after must be a positive number of seconds, got {expire_after!r}"
            )
        if keep_latest is not None and (
            isinstance(keep_latest, bool) or not isinstance(keep_latest, int) or keep_latest < 1
        ):
            raise InvalidOperationError(
                f"keep_latest must be a positive number of events, got {keep_latest!r}"
            )
        self.rows.set(scope, expire_after, keep_latest, actor)
        self.policies(fresh=True)

    def policy_for(self, cid: UUID, tenant: str | None) -> RetentionPolicy | None:
        found = self.policies()
        if not found:
            return None
        return (
            found.get(f"context:{cid.hex}")
            or found.get(f"tenant:{tenant or ''}")
            or found.get(STORE)
        )

    def expired(
        self, cid: UUID, tenant: str | None, last_write: datetime, now: float | None = None
    ) -> RetentionPolicy | None:
        """The policy that expired the context, or None while it lives."""
        policy = self.policy_for(cid, tenant)
        if policy is None or policy.expire_after is None:
            return None
        now = self.clock() if now is None else now
        return policy if last_write.timestamp() + policy.expire_after <= now else None

    def stale(self) -> bool:
        """Whether the next check would read the policies from the database first (an
        async caller reads them on a worker thread then)."""
        return self.rows is not None and time.monotonic() - self._read_at >= REFRESH

    def active(self) -> bool:
        """Whether any policy exists (else nothing can expire)."""
        return bool(self.policies())

    def check(self, ctx: Any) -> None:
        """Raise ContextNotFoundError for an expired context (reads never serve one)."""
        policy = self.expired(ctx.id, ctx.tenant, ctx.modified_on)
        if policy is not None:
            raise ContextNotFoundError(
                f"no context with id {ctx.id} (expired: no writes for {policy.expire_after:g} s, "
                f"retention policy {policy.scope})"
            )

    def sweeps(self, limit: int = 100) -> list[Sweep]:
        if self.rows is None:
            return []
        found = []
        for sweep_id, started, finished, actor, _count, details in self.rows.sweeps(limit):
            body = json.loads(details)
            found.append(Sweep(
                id=sweep_id, started=datetime.fromtimestamp(started, UTC),
                finished=datetime.fromtimestamp(finished, UTC), actor=actor,
                expired=[UUID(h) for h in body["expired"]], trimmed=body.get("trimmed", {}),
                failed=body.get("failed", {}),
            ))  # fmt: skip
        return found
