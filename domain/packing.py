"""Packing optional resources (attached files, documents) into a token budget.

The greedy rule walks the resources in order: one too large for what is left is skipped
and packing goes on (stopping at the first misfit would leave room unused). With few enough
resources the exact best subset is chosen instead: most tokens used, then the highest
total priority, then the earliest resources — never worse than the greedy rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

EXACT_UP_TO = 24  # resources; beyond this the greedy rule is used
MAX_STATES = 200_000  # distinct partial sums the exact search may hold


@dataclass(frozen=True)
class Resource:
    """An optional item for the prompt: its id, its size in tokens, its priority (higher first)."""

    id: str
    tokens: int
    priority: int = 0


@dataclass(frozen=True)
class Removed:
    resource: Resource
    reason: str


@dataclass(frozen=True)
class Packing:
    """What fitted, what did not and why, and how much of the limit is used."""

    kept: list[Resource]
    removed: list[Removed]
    used: int
    limit: int
    method: Literal["greedy", "exact"]
    notes: list[str] = field(default_factory=list)

    @property
    def utilization(self) -> float:
        return self.used / self.limit if self.limit > 0 else 0.0


def pack_greedy(resources: Sequence[Resource], limit: int) -> Packing:
    """Greedy: skip what does not fit, keep going."""
    kept: list[Resource] = []
    removed: list[Removed] = []
    used = 0
    for r in resources:
        if r.tokens > limit:
            removed.append(
                Removed(r, f"needs {r.tokens} tokens, more than the whole limit {limit}")
            )
        elif used + r.tokens > limit:
            removed.append(Removed(r, f"needs {r.tokens} tokens, {limit - used} left"))
        else:
            kept.append(r)
            used += r.tokens
    return Packing(kept, removed, used, limit, "greedy")


def pack_exact(resources: Sequence[Resource], limit: int) -> Packing | None:
    """The best subset by (tokens, priority, earliest); None if the search would be too large."""
    # best[s] = (priority sum, chosen indices) for each reachable token sum s <= limit.
    best: dict[int, tuple[int, tuple[int, ...]]] = {0: (0, ())}
    for i, r in enumerate(resources):
        if r.tokens > limit:
            continue
        for total, (prio, chosen) in list(best.items()):
            s = total + r.tokens
            if s > limit:
                continue
            candidate = (prio + r.priority, (*chosen, i))
            current = best.get(s)
            if current is None or _better(candidate, current):
                best[s] = candidate
        if len(best) > MAX_STATES:
            return None
    used = max(best, key=lambda s: (s, best[s][0], [-i for i in best[s][1]]))
    picked = set(best[used][1])
    kept = [r for i, r in enumerate(resources) if i in picked]
    removed = [
        Removed(
            r,
            f"needs {r.tokens} tokens, more than the whole limit {limit}"
            if r.tokens > limit
            else "left out by the best fit of the limit",
        )
        for i, r in enumerate(resources)
        if i not in picked
    ]
    return Packing(kept, removed, used, limit, "exact")


def _better(a: tuple[int, tuple[int, ...]], b: tuple[int, tuple[int, ...]]) -> bool:
    """Higher priority sum wins; on a tie, the earlier resources."""
    return (a[0], [-i for i in a[1]]) > (b[0], [-i for i in b[1]])


def pack(resources: Sequence[Resource], limit: int, *, exact_up_to: int = EXACT_UP_TO) -> Packing:
    """The exact best subset for few resources, the greedy rule otherwise."""
    limit = max(limit, 0)
    if len(resources) <= exact_up_to:
        exact = pack_exact(resources, limit)
        if exact is not None:
            return exact
        greedy = pack_greedy(resources, limit)
        greedy.notes.append(f"exact search over {len(resources)} resources too large; greedy")
        return greedy
    return pack_greedy(resources, limit)
