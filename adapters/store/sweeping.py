"""Retention's work across contexts: a listing without the expired contexts, and the sweep
that erases expired contexts and bounds the histories of those keeping only their latest
events (adapters/store/retention.py holds the policies and judges one context)."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from ctxstore.adapters.store import audit, erasure
from ctxstore.adapters.store.core import StoreCore
from ctxstore.adapters.store.retention import (
    ACTOR,
    STORE,
    TRIM_SLACK,
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
        for cid in to_expire:
            _expire(core, cid, actor, now, expired, failed)
        for cid, keep in to_trim:
            if cid in expired:
                continue
            try:
                removed = core.bounds.trim(cid, keep)
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


def planned(core: StoreCore, policies: dict[str, RetentionPolicy] | None = None) -> list[UUID]:
    """The contexts a sweep would erase now under `policies` (default: the stored ones),
    erasing nothing: what `sweep --dry-run` and a new policy's confirmation name."""
    policies = core.retention.policies(fresh=True) if policies is None else policies
    if not policies:
        return []
    audit.catch_up(core)
    return _candidates(core, policies, core.retention.clock())[0]


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


def _candidates(
    core: StoreCore, policies: dict[str, RetentionPolicy], now: float
) -> tuple[list[UUID], list[tuple[UUID, int]]]:
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
    expire: list[UUID] = []
    trim: list[tuple[UUID, int]] = []
    for context_hex, newest_us, tenant, head in view.last_writes():
        policy = (
            policies.get(f"context:{context_hex}") or by_tenant.get(tenant)
            or policies.get(STORE)
        )  # fmt: skip
        if policy is None:
            continue
        after, keep = policy.expire_after, policy.keep_latest
        if after is not None and newest_us / 1e6 + after <= now:
            expire.append(UUID(context_hex))
        elif keep is not None:
            origin = origins[context_hex].version if context_hex in origins else 1
            if head - keep - origin >= max(TRIM_SLACK, keep // 4):
                trim.append((UUID(context_hex), keep))
    return expire, trim
