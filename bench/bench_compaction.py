"""Compaction benchmark: planner time for 50 and 10,000 rounds (target: 50 rounds in 10 ms).

Usage: python bench/bench_compaction.py
"""

from __future__ import annotations

import statistics
import time

from ctxstore.domain.compaction import Entry, plan_compaction


def conversation(rounds: int, rounds_per_turn: int = 3) -> list[Entry]:
    entries = [Entry("s", "system", False)]
    for r in range(rounds):
        if r % rounds_per_turn == 0:
            entries.append(Entry(f"u{r}", "user", False))
        entries.append(Entry(f"c{r}", "assistant", False))
        entries.append(Entry(f"t{r}", "tool", False))
    return entries


def main() -> None:
    print("== planner (plan_compaction over the visible entries)")
    for rounds in (50, 10_000):
        entries = conversation(rounds)
        times = []
        for _ in range(21):
            t = time.perf_counter()
            plan = plan_compaction(entries)
            times.append(time.perf_counter() - t)
        target = "10 ms" if rounds == 50 else "10 ms (issue target)"
        print(
            f"{rounds:>6,} rounds ({len(entries):,} messages): {statistics.median(times) * 1e3:.3f} ms "
            f"median (target < {target}); {plan.stats.mode}, summarize "
            f"{plan.stats.summarized_rounds}, keep {plan.stats.kept_rounds}"
        )


if __name__ == "__main__":
    main()
