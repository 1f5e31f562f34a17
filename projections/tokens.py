"""Visible tokens over a context's versions, folded from its events, for charts.

Every version's total is computed, then the series is thinned to a bounded number of points
that keeps each bucket's lowest and highest value, so a compaction's drop or a rollback's
step survives thinning; compactions and rollbacks are marked at their versions.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple
from uuid import UUID

from pydantic import BaseModel, ConfigDict

from ctxstore.domain.context import Context
from ctxstore.domain.tokens import REPLY_PRIMING

MAX_POINTS = 2000
MAX_MARKS = 1000


class TokenPoint(BaseModel):
    """What sending the visible context cost at one version (as `visible().tokens`)."""

    model_config = ConfigDict(frozen=True)

    version: int
    tokens: int
    messages: int


class TokenMark(BaseModel):
    """A version where the visible context was compacted or rolled back."""

    model_config = ConfigDict(frozen=True)

    version: int
    type: str  # "compress", "expand" or "rollback"
    reverted: bool  # a later rollback undid this compaction


class TokenSeries(BaseModel):
    """The series of one context up to `version`, thinned to at most the points asked."""

    model_config = ConfigDict(frozen=True)

    context_id: UUID
    version: int
    points: list[TokenPoint]
    marks: list[TokenMark]
    marks_total: int  # marks before thinning (the newest MAX_MARKS are kept)


Step = tuple[int, int, int]  # version, tokens, visible messages


class Folded(NamedTuple):
    """A fold so far: the context at its newest version, every step, and the marks."""

    ctx: Context
    steps: list[Step]
    marks: list[TokenMark]


def fold_tokens(events: Iterable[Context.Event], start: Folded | None = None) -> Folded | None:
    """Every version's visible tokens, and the compactions and rollbacks among them; folds
    onto `start` (whose lists and context it extends) when given. None if no events."""
    ctx: Context | None = None if start is None else start.ctx
    steps: list[Step] = [] if start is None else start.steps
    marks: list[TokenMark] = [] if start is None else start.marks
    for e in events:
        ctx = e.mutate(ctx)
        assert ctx is not None
        version = e.originator_version
        steps.append((version, ctx.tokens + REPLY_PRIMING, len(ctx.order)))
        if isinstance(e, Context.MessagesCompressed):
            marks.append(TokenMark(version=version, type="compress", reverted=False))
        elif isinstance(e, Context.SummaryExpanded):
            marks.append(TokenMark(version=version, type="expand", reverted=False))
        elif isinstance(e, Context.BatchEnded) and e.reverts_from is not None:
            for i in range(len(marks) - 1, -1, -1):
                if marks[i].version < e.reverts_from:
                    break
                marks[i] = marks[i].model_copy(update={"reverted": True})
            marks.append(TokenMark(version=version, type="rollback", reverted=False))
    return None if ctx is None else Folded(ctx, steps, marks)


def thin(steps: list[Step], limit: int) -> list[Step]:
    """At most `limit` steps: each bucket's lowest and highest, in version order; the first
    and last versions are always kept."""
    if len(steps) <= limit:
        return steps
    if limit < 4:
        return [steps[0], steps[-1]]
    buckets = max((limit - 2) // 2, 1)  # two points each, and room for the first and last
    size = len(steps) / buckets
    kept = {steps[0], steps[-1]}
    for b in range(buckets):
        chunk = steps[int(b * size) : int((b + 1) * size)]
        if chunk:
            kept.update((min(chunk, key=_tokens), max(chunk, key=_tokens)))
    return sorted(kept)


def _tokens(step: Step) -> int:
    return step[1]


def token_series(context_id: UUID, folded: Folded, limit: int) -> TokenSeries:
    """The series as served: thinned to `limit` points, the newest MAX_MARKS marks."""
    steps, marks = folded.steps, folded.marks
    return TokenSeries(
        context_id=context_id,
        version=steps[-1][0] if steps else 0,
        points=[TokenPoint(version=v, tokens=t, messages=m) for v, t, m in thin(steps, limit)],
        marks=marks[-MAX_MARKS:],
        marks_total=len(marks),
    )


__all__ = [
    "MAX_POINTS", "Folded", "Step", "TokenMark", "TokenPoint", "TokenSeries", "fold_tokens", "token_series",
]  # fmt: skip
