"""Retention's work across contexts: a listing without the expired contexts, and the sweep
that erases expired contexts and bounds the histories of those keeping only their latest
events (adapters/store/retention.py holds the policies and judges one context)."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from ctxstore.adapters.store import audit, erasure
from ctxstore.adapters.store.core import StoreCore
from ctxstore.adapters.store.retention import (
    ACTOR,
    STORE,
    TRIM_SLACK,
    PlannedBound,
    PlannedExpiry,
    RetentionPlan,
    RetentionPolicy,
    Sweep,
)
from ctxstore.domain.errors import ContextNotFoundError


def unexpired(core: StoreCore, summaries: list[Any]) -> list[Any]:
    """Listed contexts without the expired ones (a listing serves none either): their
    last writes from one grouped read of the audit index, when any policy exists."""
    policies = core.retention.policies()
    if not any(p.expire_after is not None for p in policies.values()):
        return summaries
    audit.catch_up(core)
    newest = {h: us for h, us, _, _ in core.storage.audit_index.last_writes()}
    now = core.retention.clock()
    kept = []
    for s in summaries:
        policy = core.retention.policy_for(s.context_id, s.tenant)
        last = newest.get(s.context_id.hex)
        if (
            policy is None
            or policy.expire_after is None
            or last is None
            or last / 1e6 + policy.expire_after > now
        ):
            kept.append(s)
    return kept


def sweep(core: StoreCore, actor: str = ACTOR) -> Sweep:
    """Erase every expired context, bound the history of those that keep only their
    latest events; record the sweep."""
    started = datetime.now(UTC)
    policies = core.retention.policies(fresh=True)
    expired: list[UUID] = []
    trimmed: dict[str, int] = {}
    failed: dict[str, str] = {}
    if policies:
        audit.catch_up(core)
        now = core.retention.clock()
        to_expire, to_trim = _candidates(core, policies, now)
        for c in to_expire:
            _expire(core, c.cid, actor, now, expired, failed)
        for c in to_trim:
            cid = c.cid
            if cid in expired:
                continue
            try:
                removed = core.bounds.trim(cid, c.keep)
            except Exception as exc:  # noqa: BLE001 - recorded, tried again next sweep
                failed[str(cid)] = f"{type(exc).__name__}: {exc}"[:300]
                continue
            if removed:
                trimmed[str(cid)] = removed
    finished = datetime.now(UTC)
    sweep = Sweep(id=uuid.uuid4().hex, started=started, finished=finished, actor=actor,
                  expired=expired, trimmed=trimmed, failed=failed)  # fmt: skip
    if core.retention.rows is not None:
        details = json.dumps(
            {"expired": [c.hex for c in expired], "trimmed": trimmed, "failed": failed}
        )
        core.retention.rows.record_sweep(sweep.id, started.timestamp(), finished.timestamp(), actor,
                               len(expired), len(trimmed), sum(trimmed.values()), details)  # fmt: skip
    return sweep


def planned(core: StoreCore, policies: dict[str, RetentionPolicy] | None = None) -> RetentionPlan:
    """What a sweep would remove now under `policies` (default: the stored ones), per
    context, removing nothing: what `sweep --dry-run` and a new policy's confirmation say."""
    policies = core.retention.policies(fresh=True) if policies is None else policies
    if not policies:
        return RetentionPlan()
    audit.catch_up(core)
    expire, trim = _candidates(core, policies, core.retention.clock())
    return RetentionPlan(
        expire=[
            PlannedExpiry(
                context_id=c.cid, policy=c.policy, events=c.stored,
                last_write=datetime.fromtimestamp(c.newest_us / 1e6, UTC),
            )
            for c in expire
        ],
        bound=[
            PlannedBound(
                context_id=c.cid, policy=c.policy, keep_latest=c.keep,
                events_removed=c.bound - c.origin, versions_lost=(max(2, c.origin), c.bound - 1),
                readable_from=c.bound,
            )
            for c in trim
        ],
    )  # fmt: skip


def _expire(
    core: StoreCore, cid: UUID, actor: str, now: float, expired: list[UUID], failed: dict[str, str]
) -> None:
    try:
        ctx = core.storage.get(cid)  # not head(): it hides expired ones
    except ContextNotFoundError:
        return
    except Exception as exc:  # noqa: BLE001 - one damaged context must not stop the sweep
        failed[str(cid)] = f"{type(exc).__name__}: {exc}"[:300]
        return
    policy = core.retention.expired(cid, ctx.tenant, ctx.modified_on, now)
    if policy is None:
        return
    reason = f"retention: no writes for {policy.expire_after:g} s (policy {policy.scope})"
    try:
        erasure.erase_context(core, cid, actor=actor, reason=reason, with_forks=False)
        expired.append(cid)
    except ContextNotFoundError:
        return  # another instance's sweep erased it first
    except Exception as exc:  # noqa: BLE001 - recorded, tried again next sweep
        failed[str(cid)] = f"{type(exc).__name__}: {exc}"[:300]


@dataclass(frozen=True)
class _Candidate:
    cid: UUID
    policy: str  # its scope
    newest_us: int  # the newest indexed write, microseconds since the epoch
    head: int  # the newest version
    keep: int = 0  # a bound's keep_latest
    origin: int = 1  # the version of the context's checkpoint (1: none yet)

    @property
    def stored(self) -> int:
        """The events the context holds (a trim left version 1 and its origin on)."""
        return self.head if self.origin <= 1 else self.head - self.origin + 1

    @property
    def bound(self) -> int:
        """The version a trim keeps its state at (earlier ones but 1 go)."""
        return self.head - self.keep


def _candidates(
    core: StoreCore, policies: dict[str, RetentionPolicy], now: float
) -> tuple[list[_Candidate], list[_Candidate]]:
    """The contexts whose newest indexed write is older than their policy allows, and
    those holding enough events beyond their `keep_latest` to be worth a trim (each is
    then judged on its own events): one grouped scan of the audit index."""
    view = core.storage.audit_index
    by_tenant = {
        view.hidden_tenant(scope.removeprefix("tenant:") or None): p
        for scope, p in policies.items()
        if scope.startswith("tenant:")
    }
    origins = {} if core.retention.rows is None else core.retention.rows.checkpoints()
    expire: list[_Candidate] = []
    trim: list[_Candidate] = []
    for context_hex, newest_us, tenant, head in view.last_writes():
        policy = (
            policies.get(f"context:{context_hex}") or by_tenant.get(tenant)
            or policies.get(STORE)
        )  # fmt: skip
        if policy is None:
            continue
        after, keep = policy.expire_after, policy.keep_latest
        origin = origins[context_hex].version if context_hex in origins else 1
        found = _Candidate(UUID(context_hex), policy.scope, newest_us, head, origin=origin)
        if after is not None and newest_us / 1e6 + after <= now:
            expire.append(found)
        elif keep is not None and head - keep - origin >= max(TRIM_SLACK, keep // 4):
            trim.append(replace(found, keep=keep))
    return expire, trim
