"""The context listing: a fold over creation and fork events, in the order recorded."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict

from ctxstore.domain.context import Context


class ContextSummary(BaseModel):
    """A context as listed: id, name, creation time and creator."""

    model_config = ConfigDict(frozen=True)

    context_id: UUID
    name: str | None
    created_at: datetime
    created_by: str
    forked_from: dict[str, Any] | None = None  # {"context_id", "version"} of a fork's source
    tenant: str | None = None


def list_contexts(
    events: Iterable[Context.Event],
    *,
    limit: int,
    tenant: str | None = None,
    search: str | None = None,
    seen: Callable[[UUID, str | None], object] | None = None,
    after: UUID | None = None,
) -> list[ContextSummary]:
    """The first `limit` contexts of `events` (ContextCreated and ContextForked) that belong
    to `tenant` (when given) and whose name or id contains `search` (any case); with
    `after`, those created after that one (the next page: pass the last id listed). `seen`
    is told each context's tenant as it passes."""
    found: dict[UUID, ContextSummary] = {}
    needle = None if search is None else search.casefold()
    waiting = after is not None  # still before the page's start
    for e in events:
        if isinstance(e, Context.ContextForked):
            known = found.get(e.originator_id)
            if known is not None:
                origin = {"context_id": e.source_id, "version": e.source_version}
                found[e.originator_id] = known.model_copy(update={"forked_from": origin})
            continue
        if not isinstance(e, Context.ContextCreated):
            continue
        if len(found) >= limit:
            break
        if seen is not None:
            seen(e.originator_id, e.tenant)
        if waiting:
            waiting = e.originator_id != after
            continue
        if tenant is not None and e.tenant != tenant:
            continue
        if needle is not None and needle not in f"{e.name or ''} {e.originator_id}".casefold():
            continue
        found[e.originator_id] = ContextSummary(
            context_id=e.originator_id,
            name=e.name,
            created_at=e.timestamp,
            created_by=e.actor,
            tenant=e.tenant,
        )
    return list(found.values())
