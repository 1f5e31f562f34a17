"""Across the caller's contexts: the audit, usage per model, erasure records."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query

from ctxstore.adapters.http.deps import API, Requester, Served, pooled
from ctxstore.adapters.store.results import AuditPage, Erasure, ModelUsage
from ctxstore.adapters.store.shards.merged_audit import MergedAuditPage
from ctxstore.adapters.store.shards.store import ShardedStore
from ctxstore.domain.errors import InvalidOperationError

router = APIRouter(prefix=API, tags=["audit"])
Moment = Annotated[datetime | None, Query(description="ISO 8601 with a zone")]


@router.get("/audit", response_model=MergedAuditPage | AuditPage)
@pooled
def audit(
    ctx: Requester,
    since: Moment = None,
    until: Moment = None,
    types: Annotated[list[str] | None, Query()] = None,
    actor: str | None = None,
    context_id: str | None = None,
    after: Annotated[
        str,
        Query(
            max_length=4000,
            description=(
                "the cursor of the page before (a position; over shards, the merged cursor)"
            ),
        ),
    ] = "0",
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    from_version: Annotated[int | None, Query(ge=1, le=2**62)] = None,
    to_version: Annotated[int | None, Query(ge=1, le=2**62)] = None,
) -> AuditPage:
    """Events across the caller's contexts, in the order recorded; page with `after` (the
    page's `cursor`). With `context_id`, `from_version`/`to_version` read a window of its
    versions. A service over several servers answers with a merged page: its cursor is
    text, and `shards` names the server of each entry."""
    return ctx.store.audit(
        since=since, until=until, types=types, actor=actor, context_id=ctx.owned(context_id),
        tenant=ctx.who.tenant, after=cursor_of(ctx.store, after), limit=limit,
        from_version=from_version, to_version=to_version,
    )  # fmt: skip


def cursor_of(store: Served, after: str) -> Any:
    """`after` as the store reads it: a position, or over shards a merged cursor."""
    text = after.strip()
    if isinstance(store, ShardedStore):
        return int(text) if text == "0" else text
    if not text.isdigit() or int(text) > 2**62:
        raise InvalidOperationError(f"after must be an audit position, got {after!r:.40}")
    return int(text)


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
