"""Search across the caller's contexts."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query

from ctxstore.adapters.http.deps import API, Requester, pooled
from ctxstore.adapters.store.results import SearchPage

router = APIRouter(prefix=API, tags=["search"])
Moment = Annotated[datetime | None, Query(description="ISO 8601 with a zone")]


@router.get("/search", response_model=SearchPage)
@pooled
def search(
    ctx: Requester,
    q: Annotated[str, Query(max_length=1000, description='words, and "quoted phrases"')],
    context_id: Annotated[list[str] | None, Query(description="only these contexts")] = None,
    role: Annotated[list[str] | None, Query(description="only messages of these roles")] = None,
    since: Moment = None,
    until: Moment = None,
    include_hidden: bool = False,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    cursor: Annotated[str | None, Query(max_length=4000, description="the page before's")] = None,
) -> SearchPage:
    """Messages across the caller's contexts that hold every word (in any order) and every
    quoted phrase, best first; case and accents aside, Chinese, Japanese and Korean by any
    substring of two or more characters. Only what each context shows now, unless
    `include_hidden`. Another tenant's contexts are never searched."""
    return ctx.store.search(
        q, tenant=ctx.who.tenant, context_ids=context_id, roles=role, since=since,
        until=until, include_hidden=include_hidden, limit=limit, cursor=cursor,
    )  # fmt: skip
