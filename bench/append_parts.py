"""Where an append's time goes, measured in place: the store's own functions on the write
path are wrapped with timers while appends run, and each part's seconds are summed.

The parts are disjoint calls of one append (none is inside another), so what is left of
the append's time is the writer's and the facade's own work (locks, turns, retention, the
command's own lines: ids, the stored form of each message). Each wrapper costs about a microsecond: the parts are measured in a pass of their
own, after the ratios, so the timers do not touch those.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from ctxstore.adapters.store import writer
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.domain import context_commands
from ctxstore.domain.context import Context

Parts = dict[str, float]


@contextmanager
def _timed(owner: Any, name: str, label: str, parts: Parts) -> Iterator[None]:
    """`owner.name` summing its seconds into parts[label] until the block ends."""
    original = getattr(owner, name)
    had_own = name in vars(owner)  # an instance's attribute, or the class's

    def timing(*args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            parts[label] += time.perf_counter() - t

    setattr(owner, name, timing)
    try:
        yield
    finally:
        if had_own:
            setattr(owner, name, original)
        else:
            delattr(owner, name)


def measure(store: ContextStore, append: Callable[[int], None], n: int) -> tuple[float, Parts]:
    """Seconds per append over `n` calls of append(i), and each part's seconds per append."""
    parts: Parts = dict.fromkeys(
        ("checks before the write", "parse", "transcript check", "token count",
         "event made and applied", "seal and encode", "recorder transaction",
         "snapshot policy", "result"),
        0.0,
    )  # fmt: skip
    storage = store._storage
    with ExitStack() as stack:
        for owner, name, label in (
            (store._commands, "insert", "checks before the write"),  # actor, attachments, sizes
            (context_commands, "stored_batch", "parse"),
            (context_commands, "check_placement", "transcript check"),
            (context_commands, "message_cost", "token count"),
            (Context, "trigger_event", "event made and applied"),
            (storage.mapper, "to_sealed_events", "seal and encode"),
            (storage.recorder, "insert_events", "recorder transaction"),
            (store._writer, "maybe_snapshot", "snapshot policy"),
            (writer, "written_of", "result"),
        ):
            stack.enter_context(_timed(owner, name, label, parts))
        t = time.perf_counter()
        for i in range(n):
            append(i)
        total = time.perf_counter() - t
    return total / n, {k: v / n for k, v in parts.items()}


def report(per_append: float, parts: Parts) -> str:
    """One line: each part in microseconds, the rest, and the Python outside the recorder."""
    rest = per_append - sum(parts.values())
    shown = ", ".join(f"{k} {v * 1e6:.0f}" for k, v in parts.items())
    python = per_append - parts["recorder transaction"]
    return (
        f"append breakdown in place (us, timers on): {per_append * 1e6:.0f} = {shown}, "
        f"writer and facade {rest * 1e6:.0f}; Python outside the recorder "
        f"{python * 1e6:.0f} (target <= 150)"
    )
