"""What the store's operations return: one module to import every result type from.

The types of the read side that projections build (the visible context, history, audit
pages, diffs, token series, usage) and the prompt are re-exported here beside the ones the
store defines, so a caller of any surface (the facade, the HTTP client) imports from one place.
"""

from __future__ import annotations

from typing import Any, NamedTuple
from uuid import UUID

from pydantic import BaseModel, ConfigDict

from ctxstore.adapters.storage.codec.chain import BrokenLink, Verification
from ctxstore.adapters.storage.erasers import Erasure
from ctxstore.domain.prompt import Prompt
from ctxstore.projections.audit import AuditEntry, AuditPage
from ctxstore.projections.calls import ModelCall, PromptChange, PromptDiff
from ctxstore.projections.changes import Change, Diff
from ctxstore.projections.history import HistoryEntry, TailEvent
from ctxstore.projections.listing import ContextSummary
from ctxstore.projections.search import SearchHit, SearchPage
from ctxstore.projections.tokens import TokenSeries
from ctxstore.projections.usage import ModelUsage
from ctxstore.projections.visible import BatchFrame, VisibleContext


class Written(BaseModel):
    """What a command wrote: the ids it touched, the context's new version and batch."""

    model_config = ConfigDict(frozen=True)

    context_id: UUID
    version: int
    batch: int
    ids: list[str]
    tokens: int  # what the visible context now costs in a prompt
    messages: int  # how many messages are visible


class Compaction(BaseModel):
    """What a compaction planned and, unless skipped or a dry run, wrote."""

    model_config = ConfigDict(frozen=True)

    context_id: UUID
    trigger: str
    plan: dict[str, Any]
    replaced: list[str]  # the visible messages the summary took the place of
    skipped: str | None = None
    dry_run: bool = False
    summary_id: str | None = None
    version: int | None = None  # the context's version after the compaction
    batch: int | None = None
    tokens_before: int | None = None  # visible tokens before and after
    tokens_after: int | None = None
    stats: dict[str, Any] = {}


class ReplayStep(NamedTuple):
    """One event and the visible context right after it (`calls`: model calls that sent it)."""

    event: HistoryEntry
    visible: VisibleContext
    calls: list[int]


__all__ = [
    "AuditEntry",
    "AuditPage",
    "BatchFrame",
    "BrokenLink",
    "Change",
    "Compaction",
    "ContextSummary",
    "Diff",
    "Erasure",
    "HistoryEntry",
    "ModelCall",
    "ModelUsage",
    "Prompt",
    "PromptChange",
    "PromptDiff",
    "ReplayStep",
    "SearchHit",
    "SearchPage",
    "TailEvent",
    "TokenSeries",
    "Verification",
    "VisibleContext",
    "Written",
]  # fmt: skip
