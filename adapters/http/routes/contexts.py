"""Contexts: create, find by your own key, list, read, fork, erase."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal
from uuid import UUID

from fastapi import APIRouter, Query, Response

from ctxstore.adapters.http.deps import API, Owned, Requester, pooled
from ctxstore.adapters.http.schemas import CreateBody, Created, ForkBody, Found, KeyBody
from ctxstore.adapters.store.results import ContextSummary, Erasure, VisibleContext
from ctxstore.domain.errors import ContextExistsError, ContextNotFoundError
from ctxstore.domain.limits import MAX_KEY, MAX_PAGE, tenant_scoped_id

router = APIRouter(prefix=f"{API}/contexts", tags=["contexts"])
MAX_VERSION = 2**62


@router.post("", status_code=201, response_model=Created)
@pooled
def create(body: CreateBody, ctx: Requester, response: Response) -> Created:
    """Create an empty context. With tokens, an id of your choosing is scoped to your tenant:
    the context's id is derived from both (returned here), and the chosen id keeps naming it
    in your requests; another tenant's ids can neither be taken nor told apart from unused."""
    chosen = body.context_id
    if chosen is not None and ctx.who.tenant is not None:
        if _owner(ctx, chosen) == ctx.who.tenant:
            # The id of one of the tenant's own contexts (as a creation returned it): taken.
            raise ContextExistsError(f"context {chosen} already exists")
        chosen = tenant_scoped_id(ctx.who.tenant, chosen)
    cid = ctx.store.create(
        name=body.name, metadata=body.metadata, encoding=body.encoding, model=body.model,
        actor=ctx.who.actor,
        tenant=ctx.who.tenant, context_id=chosen,
    )  # fmt: skip
    response.headers["Location"] = f"{API}/contexts/{cid}"
    response.headers["ETag"] = '"1"'
    return Created(context_id=cid, version=1)


def _owner(ctx: Requester, cid: UUID) -> str | None:
    """The tenant whose context `cid` is, or None when there is no such context."""
    try:
        return ctx.store.hooks.tenant_of(cid)
    except ContextNotFoundError:
        return None


@router.post("/by-key", response_model=Created)
@pooled
def context_for_key(body: KeyBody, ctx: Requester) -> Created:
    """The context your own key names (e.g. a session id), created on first use."""
    cid = ctx.store.context_for_key(
        body.key, tenant=ctx.who.tenant, name=body.name, metadata=body.metadata,
        actor=ctx.who.actor,
    )  # fmt: skip
    return Created(context_id=cid, version=ctx.store.visible(cid).version)


@router.get("", response_model=list[ContextSummary])
@pooled
def contexts(
    ctx: Requester,
    search: Annotated[str | None, Query(max_length=200)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 1000,
    after: UUID | None = None,
) -> list[ContextSummary]:
    """The caller's contexts in creation order; `search` matches name or id; `after` pages
    on from the last id listed."""
    return ctx.store.contexts(limit=limit, tenant=ctx.who.tenant, search=search, after=after)


MAX_OVERVIEW = 200  # contexts an overview page reads the head of


class ContextOverview(ContextSummary):
    """A context as the web view lists it: beside its summary, where its head is now."""

    version: int
    messages: int
    tokens: int
    changed_at: datetime


@router.get("/overview", response_model=list[ContextOverview])
@pooled
def overview(
    ctx: Requester,
    search: Annotated[str | None, Query(max_length=200)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_OVERVIEW)] = 100,
    after: UUID | None = None,
) -> list[ContextOverview]:
    """The caller's contexts as `GET /contexts` lists them, each with its head's version,
    visible messages, tokens and last change (a read of each head: at most 200 a page)."""
    found = ctx.store.contexts(limit=limit, tenant=ctx.who.tenant, search=search, after=after)
    rows = []
    for summary in found:
        try:
            head = ctx.store.visible(summary.context_id)
        except ContextNotFoundError:
            continue  # erased or expired since it was listed
        rows.append(ContextOverview(
            **summary.model_dump(), version=head.version, messages=len(head.messages),
            tokens=head.tokens, changed_at=head.modified_at,
        ))  # fmt: skip
    return rows


@router.get("/by-key", response_model=Found)
@pooled
def lookup_key(
    ctx: Requester, key: Annotated[str, Query(min_length=1, max_length=MAX_KEY)]
) -> Found:
    """The context your own key names, if it was created (`context_id` null otherwise)."""
    return Found(context_id=ctx.store.lookup_key(key, tenant=ctx.who.tenant))


@router.get("/{context_id}", response_model=VisibleContext, tags=["reads"])
@pooled
def visible(
    ctx: Owned,
    response: Response,
    at_version: Annotated[int | None, Query(ge=1, le=MAX_VERSION)] = None,
    at_time: Annotated[datetime | None, Query(description="ISO 8601 with a zone")] = None,
    inline: Annotated[
        bool, Query(description="attachments as their data, not as ctxstore-blob: references")
    ] = False,
    files: Annotated[
        Literal["openai", "anthropic"] | None,
        Query(description="attachments as this provider's file ids where one was recorded"),
    ] = None,
) -> VisibleContext:
    """The visible context now, at a version, or as it was at a time."""
    found = ctx.store.visible(
        ctx.cid, at_version=at_version, at_time=at_time, inline=inline, files=files
    )
    if at_version is None and at_time is None:
        response.headers["ETag"] = f'"{found.version}"'
    return found


@router.post("/{context_id}/fork", status_code=201, response_model=Created, tags=["commands"])
@pooled
def fork(ctx: Owned, body: ForkBody, response: Response) -> Created:
    """A new context starting as a copy of this one's visible context (at a version)."""
    new = ctx.store.fork(
        ctx.cid, at_version=body.at_version, name=body.name, metadata=body.metadata,
        actor=ctx.who.actor,
    )  # fmt: skip
    response.headers["Location"] = f"{API}/contexts/{new}"
    return Created(context_id=new, version=ctx.store.visible(new).version)


@router.delete("/{context_id}", response_model=Erasure)
@pooled
def erase(
    ctx: Owned,
    reason: Annotated[str, Query(min_length=1, max_length=1000)],
    with_forks: Annotated[
        bool | None,
        Query(description="its forks hold copies: true erases them too, false keeps them"),
    ] = None,
) -> Erasure:
    """Erase the context's contents for good (right to be forgotten); a record stays. With
    forks holding copies, refused (422) unless with_forks says what to do with them."""
    return ctx.store.erase(ctx.cid, reason=reason, actor=ctx.who.actor, with_forks=with_forks)
