"""Budgeted prompt building: what to send when the context does not fit its budget.

Every strategy works on units — a single message, or an assistant message with its tool
calls together with their results — so no call is ever separated from its result. The
system and developer messages and the newest message the user wrote (never a summary,
whatever its role) are always kept; summaries are kept as room allows, and `full` and
`compressed` drop one only after every turn after it (the cheapest memory of what it
replaced), where `adaptive` and `semantic` judge it as one more message; the result
never exceeds floor(budget x safety) tokens, counting the reply priming and any message
the strategy adds (a truncation marker, a topic summary).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict

from ctxstore.domain.conversions import ShapedMessages
from ctxstore.domain.errors import InvalidOperationError, PromptDoesNotFitError
from ctxstore.domain.limits import strict_int
from ctxstore.domain.messages import Message
from ctxstore.domain.packing import Packing, Resource, pack
from ctxstore.domain.prompt_config import (
    AdaptiveConfig,
    CompressedConfig,
    FullConfig,
    PromptConfig,
    SemanticConfig,
    Strategy,
)
from ctxstore.domain.relevance import lexical_similarity, mentions
from ctxstore.domain.tokens import REPLY_PRIMING
from ctxstore.domain.transcript import blocks_of, pairing_fields

STRATEGIES: tuple[str, ...] = ("full", "compressed", "adaptive", "semantic")
Similarity = Callable[[str, str], float]


class PromptItem(NamedTuple):
    """A visible message with its stored token count."""

    message: Message
    tokens: int
    summary: bool = False


class OmittedMessage(NamedTuple):
    """A message left out of the prompt, and why."""

    id: str
    reason: str


@dataclass(frozen=True, slots=True)
class OmittedResource:
    """A resource left out of the prompt, and why."""

    id: str
    tokens: int
    reason: str


class Prompt(ShapedMessages, BaseModel):
    """What to send: the messages, their total, and what was left out and why."""

    model_config = ConfigDict(frozen=True)

    strategy: Strategy
    budget: int
    limit: int  # floor(budget x safety): the total never exceeds it
    messages: list[Message]
    tokens: int  # messages + reply priming + kept resources
    message_tokens: int
    added: list[str]  # ids of messages the strategy wrote (marker, topic summary)
    omitted: list[OmittedMessage]
    resources: list[str]
    resource_tokens: int
    omitted_resources: list[OmittedResource]
    resource_utilization: float
    estimated: bool
    version: int | None = None  # the context version it was built from


@dataclass(slots=True)
class _Unit:
    items: list[PromptItem]
    index: int  # position among units
    turn: int  # index of the user message that opened its turn (-1 before any)
    must: bool
    tokens: int
    _text: str | None = None

    @property
    def ids(self) -> list[str]:
        return [str(i.message.id) for i in self.items]

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = " ".join(i.message.text() for i in self.items)
        return self._text


def _units(items: Sequence[PromptItem]) -> list[_Unit]:
    """Group messages so a tool call and its results (and a reasoning item and what it led
    to) travel together."""
    ids = [f"#{n}" for n in range(len(items))]  # positions: a prompt may hold new messages
    stored = {i: pairing_fields(item.message) for i, item in zip(ids, items, strict=True)}
    block_of = blocks_of(ids, stored)
    units: list[_Unit] = []
    turn = -1
    newest_user = -1
    for n in range(len(items) - 1, -1, -1):
        if items[n].message.role == "user" and not items[n].summary:
            newest_user = n  # the newest message the user wrote: a summary never is one
            break
    for n, item in enumerate(items):
        role = item.message.role
        block = block_of.get(ids[n])
        if units and block is not None and n > 0 and block_of.get(ids[n - 1]) == block:
            last = units[-1]
            last.items.append(item)
            last.tokens += item.tokens
            continue
        if role == "user":
            turn = n
        must = (role in ("system", "developer") and not item.summary) or n == newest_user
        units.append(_Unit([item], len(units), turn, must, item.tokens))
    return units


@dataclass(frozen=True)
class PromptUnits:
    """A context's messages grouped into units once, for several prompts of one version."""

    units: list[_Unit]


def prompt_units(items: Sequence[PromptItem]) -> PromptUnits:
    """Group the messages once; pass the result to build_prompt to skip the grouping."""
    return PromptUnits(_units(items))


def build_prompt(
    items: Sequence[PromptItem] | PromptUnits,
    budget: int,
    *,
    count: Callable[[Message], int],
    config: PromptConfig | None = None,
    strategy: Strategy | None = None,
    query: str | None = None,
    resources: Sequence[Resource] = (),
    similarity: Similarity = lexical_similarity,
    estimated: bool = False,
) -> Prompt:
    """Choose what to send of `items` under `budget`.

    `count` prices a message the strategy writes itself; `query` steers `semantic` (default:
    the newest user message). Raises PromptDoesNotFitError, InvalidOperationError.
    """
    cfg = config or PromptConfig()
    chosen_strategy = strategy or cfg.strategy
    if chosen_strategy not in STRATEGIES:
        raise InvalidOperationError(
            f"unknown strategy {chosen_strategy!r}; choose one of {', '.join(STRATEGIES)}"
        )
    if not strict_int(budget) or budget <= 0:
        raise InvalidOperationError(f"budget must be a positive number of tokens, got {budget!r}")
    limit = math.floor(budget * cfg.safety)
    units = items.units if isinstance(items, PromptUnits) else _units(items)
    must_tokens = sum(u.tokens for u in units if u.must) + REPLY_PRIMING
    if must_tokens > limit:
        raise PromptDoesNotFitError(
            f"the system/developer messages and the newest user message alone need "
            f"{must_tokens} tokens; the limit is {limit} (budget {budget} x safety {cfg.safety})"
        )
    plan = _Plan(units, limit, count)
    if chosen_strategy == "full":
        _full(plan, cfg.full)
    elif chosen_strategy == "compressed":
        _compressed(plan, cfg.compressed)
    elif chosen_strategy == "adaptive":
        _adaptive(plan, cfg.adaptive)
    else:
        newest_user = next(
            (u for u in reversed(units) if u.must and u.items[0].message.role == "user"), None
        )
        _semantic(
            plan,
            cfg.semantic,
            query if query is not None else (newest_user.text if newest_user else ""),
            similarity,
        )
    return plan.result(chosen_strategy, budget, resources, estimated)


class _Plan:
    """The units chosen so far, their running cost, and why the others were left out."""

    def __init__(self, units: list[_Unit], limit: int, count: Callable[[Message], int]) -> None:
        self.units = units
        self.limit = limit
        self.count = count
        self.kept: set[int] = set()
        self._used = REPLY_PRIMING
        self.reasons: dict[int, str] = {}
        self.added: list[
            tuple[int, Message, int]
        ] = []  # (place before unit index, message, tokens)
        for u in units:
            if u.must:
                self._keep(u)

    def used(self) -> int:
        return self._used

    def fits(self, extra: int) -> bool:
        return self._used + extra <= self.limit

    def _keep(self, unit: _Unit) -> None:
        if unit.index not in self.kept:
            self.kept.add(unit.index)
            self._used += unit.tokens
        self.reasons.pop(unit.index, None)

    def keep_all(self, units: Sequence[_Unit]) -> None:
        for u in units:
            self._keep(u)

    def take(self, unit: _Unit) -> bool:
        """Keep the unit if it fits what is left."""
        if unit.index in self.kept:
            return True
        if self.fits(unit.tokens):
            self._keep(unit)
            return True
        return False

    def leave(self, unit: _Unit, reason: str) -> None:
        if unit.must:
            return
        if unit.index in self.kept:
            self.kept.discard(unit.index)
            self._used -= unit.tokens
        self.reasons[unit.index] = reason

    def add(self, message: Message) -> bool:
        """Add a message the strategy wrote, after the leading system messages, if it fits."""
        tokens = self.count(message)
        if not self.fits(tokens):
            return False
        place = next(
            (u.index for u in self.units if u.items[0].message.role not in ("system", "developer")),
            len(self.units),
        )
        self.added.append((place, message, tokens))
        self._used += tokens
        return True

    def result(
        self, strategy: Strategy, budget: int, resources: Sequence[Resource], estimated: bool
    ) -> Prompt:
        messages: list[Message] = []
        omitted: list[OmittedMessage] = []
        places = {place for place, _, _ in self.added}
        kept, reasons = self.kept, self.reasons
        for u in self.units:
            if u.index in places:
                messages.extend(m for place, m, _ in self.added if place == u.index)
            if u.index in kept:
                messages.extend([i.message for i in u.items])
            else:
                reason = reasons.get(u.index, "left out by the strategy")
                omitted.extend([OmittedMessage(str(i.message.id), reason) for i in u.items])
        messages.extend(m for place, m, _ in self.added if place >= len(self.units))
        message_tokens = self.used()
        packing: Packing = pack(resources, self.limit - message_tokens)
        # Built from checked values: skip re-validating thousands of models.
        return Prompt.model_construct(
            strategy=strategy,
            budget=budget,
            limit=self.limit,
            messages=messages,
            tokens=message_tokens + packing.used,
            message_tokens=message_tokens,
            added=[str(m.id) for _, m, _ in self.added],
            omitted=omitted,
            resources=[r.id for r in packing.kept],
            resource_tokens=packing.used,
            omitted_resources=[
                OmittedResource(r.resource.id, r.resource.tokens, r.reason) for r in packing.removed
            ],
            resource_utilization=packing.utilization,
            estimated=estimated,
        )


def _full(plan: _Plan, cfg: FullConfig) -> None:
    """Everything; over budget, whole turns go oldest first, then the last turn's oldest
    units, and summaries last: a summary is the cheapest memory of what it replaced, so it
    goes only once every turn after it has gone."""
    droppable = [u for u in plan.units if not u.must]
    plan.keep_all(droppable)
    if plan.fits(0):
        return
    reserve = plan.count(_marker(len(plan.units) * 9)) if cfg.marker else 0
    summaries = [u for u in droppable if _is_summary(u)]
    turns: dict[int, list[_Unit]] = {}
    for u in droppable:
        if not _is_summary(u):
            turns.setdefault(u.turn, []).append(u)
    order = list(turns.values())
    dropped = 0
    for n, turn in enumerate(order):
        if plan.fits(reserve):
            break
        last = n == len(order) - 1
        for u in turn:
            plan.leave(u, "oldest turn dropped to fit the budget")
            dropped += len(u.items)
            if last and plan.fits(reserve):
                break  # the current turn loses only what it must
    for u in summaries:  # oldest first, once nothing after them is left to drop
        if plan.fits(reserve):
            break
        plan.leave(u, "summary dropped last to fit the budget")
        dropped += len(u.items)
    if cfg.marker and dropped:
        plan.add(_marker(dropped))


def _is_summary(unit: _Unit) -> bool:
    return any(i.summary for i in unit.items)


def _marker(n: int) -> Message:
    return Message(
        id="ctxstore-marker",
        role="system",
        content=f"[Earlier conversation truncated: {n} messages]",
        metadata={"ctxstore": "marker"},
    )


def _compressed(plan: _Plan, cfg: CompressedConfig) -> None:
    """Summaries and the last `recent_messages` messages; the rest is left out."""
    recent: list[_Unit] = []
    count = 0
    for u in reversed(plan.units):
        if count >= cfg.recent_messages:
            break
        recent.append(u)
        count += len(u.items)
    summaries = [u for u in plan.units if any(i.summary for i in u.items)]
    wanted = {u.index for u in recent} | {u.index for u in summaries}
    for u in plan.units:
        if u.index not in wanted:
            plan.leave(
                u, f"older than the {cfg.recent_messages} most recent messages and not a summary"
            )
    # Summaries first (newest first), then the recent messages newest first: a summary is
    # the cheapest memory of what it replaced, so it goes only after the turns after it.
    for u in reversed(summaries):
        if not plan.take(u):
            plan.leave(u, "summary, but over budget")
    for u in recent:
        if u.index in {s.index for s in summaries}:
            continue
        if not plan.take(u):
            plan.leave(u, "recent, but over budget")


def _adaptive(plan: _Plan, cfg: AdaptiveConfig) -> None:
    """Recent messages up to a share of the limit, then important ones, then topics."""
    recent_cap = plan.limit * cfg.recent_share
    important_cap = plan.limit * cfg.important_share
    taken_recent = 0
    for u in reversed(plan.units):
        if u.must:
            continue
        within = plan.used() + u.tokens <= recent_cap
        if (within or taken_recent < cfg.min_recent) and plan.take(u):
            taken_recent += len(u.items)
        else:
            break
    keywords = tuple(k.lower() for k in cfg.keywords)
    for u in reversed(plan.units):
        if u.index in plan.kept:
            continue
        if mentions(u.text, keywords):
            if plan.used() + u.tokens <= important_cap and plan.take(u):
                continue
            plan.leave(u, "important, but over the important layer's share of the budget")
        else:
            plan.leave(u, "background: neither recent nor important")
    background = [u for u in plan.units if u.index not in plan.kept]
    if cfg.topic_summary and background:
        _topic_summary(plan, background, cfg.topic_chars, cfg.max_topics)


def _topic_summary(plan: _Plan, background: list[_Unit], chars: int, most: int) -> None:
    """One message naming the newest left-out user topics (at most `most`) that fit."""
    head = "[Session summary] Earlier topics: "
    room = plan.limit - plan.used() - plan.count(Message(role="system", content=head))
    topics: list[str] = []
    for u in reversed(background):
        if u.items[0].message.role != "user" or not u.text.strip():
            continue
        topic = " ".join(u.text.split())[:chars]
        cost = plan.count(Message(role="user", content=topic)) - 4  # its text, roughly
        if cost > room or len(topics) >= most:
            break
        room -= cost + 1  # and the separator
        topics.append(topic)
    while topics:
        summary = Message(
            id="ctxstore-topics",
            role="system",
            content=head + "; ".join(reversed(topics)),
            metadata={"ctxstore": "topic-summary"},
        )
        if plan.add(summary):
            return
        topics.pop()  # the estimate was short: drop the oldest topic kept and try again


def _semantic(plan: _Plan, cfg: SemanticConfig, query: str, similarity: Similarity) -> None:
    """The last `recent` messages, then the others by relevance to the query."""
    count = 0
    for u in reversed(plan.units):
        if count >= cfg.recent:
            break
        count += len(u.items)
        if not plan.take(u):
            plan.leave(u, "recent, but over budget")
    scored = sorted(
        ((similarity(query, u.text), u) for u in plan.units if u.index not in plan.kept),
        key=lambda p: (-p[0], -p[1].index),
    )
    for score, u in scored:
        if score < cfg.threshold:
            plan.leave(u, f"relevance {score:.2f} to the query is below {cfg.threshold}")
        elif not plan.take(u):
            plan.leave(u, f"relevant ({score:.2f}) but over budget")


__all__ = [
    "AdaptiveConfig", "CompressedConfig", "FullConfig", "Prompt", "PromptConfig", "PromptItem",
    "PromptUnits", "SemanticConfig", "Similarity", "Strategy", "build_prompt", "lexical_similarity",
    "prompt_units",
]  # fmt: skip


def sent_with(
    prompt: Any, version: int | None, counted_tokens: int | None, sent: Any
) -> tuple[int | None, int | None, Any]:
    """A usage record's (version, counted_tokens, sent) when the caller gave the `prompt`
    it sent (from build_prompt): its version, its total and its messages, unless given
    outright. Raises InvalidOperationError for what is not a Prompt, or for both a prompt
    and the messages sent."""
    if prompt is None:
        return version, counted_tokens, sent
    if not isinstance(prompt, Prompt):
        raise InvalidOperationError(f"prompt must be a Prompt, got {type(prompt).__name__}")
    if sent is not None:
        raise InvalidOperationError("give a prompt or the messages sent, not both")
    return (
        prompt.version if version is None else version,
        prompt.tokens if counted_tokens is None else counted_tokens,
        list(prompt.messages),
    )
