"""Half-window compaction planning at turn boundaries.

Views over the visible context, nothing copied: a turn starts at a user message; a round
is one assistant message with the tool results that answer its calls. The planner takes the
rounds after the latest summary, keeps the newest half verbatim and summarizes the older
half, moving the split to a turn boundary, with these fallback levels:
  level 0  half-window compaction
  level 1  not enough rounds -> single-round compaction (all but the newest round)
  level 2  a summary boundary leaves too few rounds -> skip, and say why
  level 3  nothing to summarize -> NothingToSummarizeError
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from ctxstore.domain.errors import NothingToSummarizeError
from ctxstore.domain.shapes import RESULT_ROLES

MIN_ROUNDS = 4  # half-window needs at least this many rounds
MIN_KEEP = 2  # MIN_OVERLAP + 1 rounds are always kept


class Entry(NamedTuple):
    """One visible message as the planner sees it."""

    id: str
    role: str
    summary: bool  # a summary written by an earlier compaction


class Round(NamedTuple):
    """An assistant message and the tool results that follow it: [start, end) positions."""

    start: int
    end: int
    turn: int  # position of the user message opening its turn; -1 before any


def rounds_of(entries: Sequence[Entry], start: int = 0) -> list[Round]:
    """The rounds from position `start` on, in order."""
    roles = [e.role for e in entries]
    turn = max((p for p in range(start) if roles[p] == "user"), default=-1)
    rounds: list[Round] = []
    pos, n = start, len(roles)
    while pos < n:
        role = roles[pos]
        if role == "assistant":
            end = pos + 1
            while end < n and roles[end] in RESULT_ROLES:
                end += 1
            rounds.append(Round(pos, end, turn))
            pos = end
            continue
        if role == "user":
            turn = pos
        pos += 1
    return rounds


def turns_of(entries: Sequence[Entry]) -> list[int]:
    """Positions of the user messages that open turns."""
    return [pos for pos, e in enumerate(entries) if e.role == "user"]


@dataclass(frozen=True)
class PlanStats:
    """The planner's compression stats."""

    mode: Literal["half-window", "single-round", "fallback"]
    total_rounds: int
    summarized_rounds: int
    kept_rounds: int
    split_strategy: Literal["turn-boundary", "active-only", "none"]
    fallback_reason: str | None = None
    boundary_adjustment: Literal["exact", "adjusted-to-turn-start", "adjusted-to-turn-end"] = (
        "exact"
    )


@dataclass(frozen=True)
class CompactionPlan:
    """What to replace by a summary (a contiguous run of visible ids), or why nothing."""

    stats: PlanStats
    summarize: list[str] = field(default_factory=list)
    skipped: str | None = None  # the reason, when the plan is to do nothing

    def as_dict(self) -> dict[str, object]:
        s = self.stats
        return {
            "mode": s.mode,
            "total_rounds": s.total_rounds,
            "summarized_rounds": s.summarized_rounds,
            "kept_rounds": s.kept_rounds,
            "split_strategy": s.split_strategy,
            "fallback_reason": s.fallback_reason,
            "boundary_adjustment": s.boundary_adjustment,
        }


def plan_compaction(entries: Sequence[Entry], *, min_rounds: int = MIN_ROUNDS) -> CompactionPlan:
    """Plan a compaction of the visible context; raises NothingToSummarizeError."""
    last_summary = next((p for p in range(len(entries) - 1, -1, -1) if entries[p].summary), -1)
    region = last_summary + 1
    while region < len(entries) and entries[region].role in ("system", "developer"):
        region += 1  # instructions at the start are never summarized
    rounds = rounds_of(entries, region)
    n = len(rounds)
    if n < min_rounds:
        if last_summary >= 0:
            return CompactionPlan(
                PlanStats("fallback", n, 0, n, "none", "summary-boundary"),
                skipped=f"only {n} round(s) since the latest summary; at least {min_rounds} "
                "are needed to compact again",
            )
        return _single_round(entries, region, rounds, "not-enough-rounds")
    keep = max(MIN_KEEP, math.ceil(n / 2))
    split, adjustment = _to_turn_boundary(rounds, n - keep)
    if split <= 0:
        return _single_round(entries, region, rounds, "not-enough-rounds")
    run_start, run_end, strategy = _run(entries, region, rounds, split)
    if run_end <= run_start:
        return _single_round(entries, region, rounds, "not-enough-rounds")
    gone = _counted(rounds, run_start, run_end)
    stats = PlanStats("half-window", n, gone, n - gone, strategy, None, adjustment)
    return CompactionPlan(stats, [e.id for e in entries[run_start:run_end]])


def _to_turn_boundary(
    rounds: list[Round], split: int
) -> tuple[int, Literal["exact", "adjusted-to-turn-start", "adjusted-to-turn-end"]]:
    """A split inside a turn moves back to the turn's start, else on to the next
    turn's start; inside the only turn there is (the active one) it stays where it is."""
    if split <= 0 or split >= len(rounds) or rounds[split].turn != rounds[split - 1].turn:
        return split, "exact"
    turn = rounds[split].turn
    back = split
    while back > 0 and rounds[back - 1].turn == turn:
        back -= 1
    if back > 0:
        return back, "adjusted-to-turn-start"
    forward = split
    while forward < len(rounds) and rounds[forward].turn == turn:
        forward += 1
    if forward <= len(rounds) - MIN_KEEP:
        return forward, "adjusted-to-turn-end"
    return split, "exact"


def _run(
    entries: Sequence[Entry], region: int, rounds: list[Round], split: int
) -> tuple[int, int, Literal["turn-boundary", "active-only"]]:
    """The positions [start, end) to summarize when rounds[:split] go."""
    first_kept = rounds[split]
    if first_kept.turn != rounds[split - 1].turn:
        # A turn boundary: the kept part starts with its turn's user message.
        return region, first_kept.turn, "turn-boundary"
    # Inside one turn (the active one): its user message stays, its older rounds go.
    return max(region, first_kept.turn + 1), first_kept.start, "active-only"


def _counted(rounds: list[Round], start: int, end: int) -> int:
    """How many rounds lie wholly within [start, end) (rounds are in order)."""
    first = bisect_left(rounds, start, key=lambda r: r.start)
    last = bisect_right(rounds, end, key=lambda r: r.end)
    return max(0, last - first)


def _single_round(
    entries: Sequence[Entry], region: int, rounds: list[Round], reason: str
) -> CompactionPlan:
    """Fallback level 1: all but the newest round; level 3 when that leaves nothing."""
    n = len(rounds)
    if n >= 2:
        last, prev = rounds[-1], rounds[-2]
        if last.turn >= prev.end:
            start, end = region, last.turn  # the newest round opened a turn: keep that turn
        else:
            start, end = max(region, last.turn + 1), last.start
        if end > start:
            gone = _counted(rounds, start, end)
            stats = PlanStats("single-round", n, gone, n - gone, "none", reason)
            return CompactionPlan(stats, [e.id for e in entries[start:end]])
    newest_turn = max((p for p in turns_of(entries) if p >= region), default=-1)
    if newest_turn > region:
        gone = _counted(rounds, region, newest_turn)
        stats = PlanStats("single-round", n, gone, n - gone, "none", reason)
        return CompactionPlan(stats, [e.id for e in entries[region:newest_turn]])
    raise NothingToSummarizeError(
        f"nothing to summarize: {n} round(s) after the latest summary and nothing older "
        "than the newest turn"
    )


class CompactionConfig(BaseModel):
    """When and how to compact; `CTXSTORE_COMPACTION__*` or `[compaction]` in the config file.

    The thresholds default to 200 visible messages and 100,000 tokens.
    """

    model_config = ConfigDict(extra="forbid")
    auto: bool = False  # compact proactively after inserts that cross a threshold
    message_limit: int = Field(default=200, ge=2)  # visible messages that trigger `auto`
    max_context_tokens: int = Field(default=100_000, ge=1)  # visible tokens that trigger it
    target_tokens: int = Field(default=800, ge=16)  # the length a summary is asked for
    # How many times an input too long for the summarizer is split in two.
    max_depth: int = Field(default=6, ge=0)
    min_chunk_messages: int = Field(default=4, ge=1)  # a chunk is not split below this
    min_rounds: int = Field(default=MIN_ROUNDS, ge=2)  # rounds since the last summary needed
    # The share of the replaced messages' tokens a summary must save to be written.
    min_saving: float = Field(default=0.1, ge=0, lt=1)


def too_little_saved(replaced: int, summary: int, min_saving: float) -> str | None:
    """Why a summary of `summary` tokens in place of messages of `replaced` tokens is not
    worth writing (it would save less than `min_saving` of them), or None when it is."""
    saved = replaced - summary
    if saved > 0 and saved >= min_saving * replaced:
        return None
    return (
        f"the summary ({summary} tokens) would save {max(saved, 0)} of the {replaced} tokens"
        f" it replaces; compaction writes one that saves at least {min_saving:.0%}"
    )


SUMMARY_MARK = {"ctxstore": "summary"}  # the metadata that marks a message as a summary


SUMMARY_ROLE = "system"


def summary_message(
    text: str, *, role: str = SUMMARY_ROLE, metadata: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The message a compaction (or a caller's plain-text summary) writes in place of the
    messages it covers, marked as a summary in its metadata (beside any other `metadata`).

    Its role is `system`: context for the model, not words of the user or of the model
    itself. Chat Completions accepts a system message at any position; it never breaks the
    user/assistant alternation some providers require; and Anthropic's shape takes it into
    the request's `system`. The prompt builder tells it from the user's request by the mark,
    never by its role."""
    return {"role": role, "content": text, "metadata": {**(metadata or {}), **SUMMARY_MARK}}
