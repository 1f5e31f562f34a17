"""Search results: the hits a query found across contexts, a page at a time."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from pydantic import BaseModel, ConfigDict


class SearchHit(BaseModel):
    """One message that matched: where it is, the match in its text, and how well."""

    model_config = ConfigDict(frozen=True)

    context_id: UUID
    context_name: str | None = None
    message_id: str
    role: str
    snippet: str  # the match in its surrounding text, marked «like this»
    score: float  # higher is better; comparable within one search
    at: datetime  # when the message was written
    visible: bool  # still in the context's current state (False: deleted, replaced, ...)
    version: int  # the context's version whose event wrote this text


class SearchPage(BaseModel):
    """One page of hits, best first; `cursor` asks for the next (None: there is none)."""

    model_config = ConfigDict(frozen=True)

    hits: list[SearchHit]
    cursor: str | None = None


__all__ = ["SearchHit", "SearchPage"]
