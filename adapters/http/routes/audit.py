"""Across the caller's contexts: the audit, usage per model, erasure records."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query

from ctxstore.adapters.http.deps import API, Requester, pooled
from ctxstore.adapters.store.results import AuditPage, Erasure, ModelUsage

router = APIRouter(prefix=API, tags=["audit"])
Moment = Annotated[datetime | None, Query(description="ISO 8601 with a zone")]


@router.get("/audit", response_model=AuditPage)
@pooled
def audit(
    ctx: Requester,
    since: Moment = None,
    until: Moment = None,
    types: Annotated[list[str] | None, Query()] = None,
    actor: str | None = None,
    context_id: str | None = None,
    after: Annotated[int, Query(ge=0, le=2**62)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    from_version: Annotated[int | None, Query(ge=1, le=2**62)] = None,
    to_version: Annotated[int | None, Query(ge=1, le=2**62)] = None,
) -> AuditPage:
    """Events across the caller's contexts, in the order recorded; page with `after`.
    With `context_id`, `from_version`/`to_version` read a window of its versions."""
    return ctx.store.audit(
        since=since, until=until, types=types, actor=actor, context_id=ctx.owned(context_id),
        tenant=ctx.who.tenant, after=after, limit=limit,
        from_version=from_version, to_version=to_version,
    )  # fmt: skip


@router.get("/usage", response_model=list[ModelUsage])
@pooled
def usage_report(
    ctx: Requester, model: str | None = None, context_id: str | None = None
) -> list[ModelUsage]:
    """Per model: the provider's prompt tokens against ctxstore's counts, over the caller's
    contexts (or one of them)."""
    return ctx.store.usage_report(
        model=model, context_id=ctx.owned(context_id), tenant=ctx.who.tenant
    )


@router.get("/erasures", response_model=list[Erasure])
@pooled
def erasures(ctx: Requester) -> list[Erasure]:
    """The records of the caller's erased contexts, oldest first."""
    return [e for e in ctx.store.erasures() if ctx.who.tenant in (None, e.tenant)]
