"""A tenant's retention policies (admin): its contexts expire after a period without writes,
or keep only their latest events; and the sweeps that applied them (audit)."""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field

from ctxstore.adapters.http.deps import API, Requester, pooled
from ctxstore.adapters.store.retention import RetentionPlan, RetentionPolicy, Sweep
from ctxstore.domain.durations import parse_duration
from ctxstore.domain.errors import ContextNotFoundError, InvalidOperationError

router = APIRouter(prefix=API, tags=["retention"])


class RetentionRequest(BaseModel):
    """A policy for the caller's contexts (or one of them); null removes it."""

    model_config = ConfigDict(extra="forbid")

    expire_after: str | None = Field(
        default=None, max_length=40, description="a period with its unit: 30d, 12h, 90m, 2w"
    )
    expire_after_seconds: float | None = Field(default=None, gt=0, le=10**10)
    keep_latest: int | None = Field(default=None, ge=1, le=2**31 - 1)
    context_id: str | None = None
    force: bool = Field(default=False, description="allow an expiry under an hour")
    yes: bool = Field(
        default=False,
        description="set it even when the next sweep would remove history under it (without "
        "this, such a policy answers 409 with the plan of what it would remove)",
    )

    def seconds(self) -> float | None:
        if self.expire_after is not None and self.expire_after_seconds is not None:
            raise InvalidOperationError("give expire_after or expire_after_seconds, not both")
        if self.expire_after is not None:
            return parse_duration(self.expire_after, "expire_after")
        return self.expire_after_seconds


@router.put("/retention", response_model=RetentionPolicy | None)
@pooled
def set_retention(body: RetentionRequest, ctx: Requester) -> RetentionPolicy | None:
    """Expire the caller's contexts (or one of them) after a period without writes; the
    service's sweeper erases them (each leaves an erasure record). A period under an hour
    is refused without `force`."""
    after, keep = body.seconds(), body.keep_latest
    return ctx.store.admin.set_retention(
        after, keep_latest=keep, actor=ctx.who.actor, force=body.force, yes=body.yes,
        **_scope(ctx, body.context_id),
    )  # fmt: skip


def _scope(ctx: Requester, context_id: str | None) -> dict[str, Any]:
    """The caller's scope: one of its contexts, its tenant, or (a service without tokens:
    one shared space) the whole store."""
    cid = ctx.owned(context_id)
    if cid is not None:
        return {"context_id": cid}
    if ctx.who.tenant is None:
        return {"everything": True}
    return {"tenant": ctx.who.tenant}


@router.get("/retention/plan", response_model=RetentionPlan)
@pooled
def retention_plan(
    ctx: Requester,
    expire_after: Annotated[str | None, Query(max_length=40)] = None,
    keep_latest: Annotated[int | None, Query(ge=1, le=2**31 - 1)] = None,
    context_id: str | None = None,
) -> RetentionPlan:
    """What a sweep would remove now from the caller's contexts, per context (erasures and
    history bounds), removing nothing; with `expire_after` or `keep_latest`, what it would
    remove under that policy at the caller's scope (or `context_id`'s) instead."""
    admin = ctx.store.admin
    if expire_after is not None or keep_latest is not None:
        after = None if expire_after is None else parse_duration(expire_after, "expire_after")
        where = _scope(ctx, context_id)
        preview: RetentionPlan = admin.retention_preview(after, keep_latest=keep_latest, **where)
        return preview
    plan: RetentionPlan = admin.sweep_plan()
    if ctx.who.tenant is None:
        return plan
    return RetentionPlan(
        expire=[e for e in plan.expire if _owns(ctx, e.context_id.hex)],
        bound=[b for b in plan.bound if _owns(ctx, b.context_id.hex)],
    )


@router.get("/retention", response_model=list[RetentionPolicy])
@pooled
def retention(ctx: Requester) -> list[RetentionPolicy]:
    """The policies that apply to the caller's contexts: the store's, its tenant's, its
    contexts' own."""
    tenant = ctx.who.tenant
    found = []
    for policy in ctx.store.admin.retention_policies():
        if (
            tenant is None
            or policy.scope in ("store", f"tenant:{tenant}")
            or policy.scope.startswith("context:")
            and _owns(ctx, policy.scope)
        ):
            found.append(policy)
    return found


def _owns(ctx: Requester, scope: str) -> bool:
    """Whether the caller owns the context (a scope "context:<id>" or an id)."""
    try:
        ctx.owned(scope.removeprefix("context:"))
    except ContextNotFoundError:  # another tenant's (or erased): not shown
        return False
    return True


@router.get("/sweeps", response_model=list[Sweep])
@pooled
def sweeps(ctx: Requester, limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> list[Sweep]:
    """The recorded retention sweeps, newest first; with tokens, each names only the
    caller's contexts (what it expired, bounded, or could not)."""
    found = ctx.store.admin.sweeps(limit=limit)
    tenant = ctx.who.tenant
    if tenant is None:
        return found
    erased = {e.context_id.hex: e.tenant for e in ctx.store.erasures()}
    owners: dict[str, bool] = {}

    def mine(context_id: str) -> bool:
        key = UUID(context_id).hex
        if key not in owners:
            if key in erased:
                owners[key] = erased[key] == tenant
            else:
                try:
                    owners[key] = ctx.store.hooks.tenant_of(key) == tenant
                except ContextNotFoundError:
                    owners[key] = False
        return owners[key]

    return [
        s.model_copy(update={
            "expired": [c for c in s.expired if mine(str(c))],
            "trimmed": {c: n for c, n in s.trimmed.items() if mine(c)},
            "failed": {c: why for c, why in s.failed.items() if mine(c)},
        })
        for s in found
    ]  # fmt: skip
