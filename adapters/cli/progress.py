"""How a long command shows it is working: a bar on a terminal, plain lines otherwise
(a log or a pipe reads one line every few seconds, not a redrawn bar)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from ctxstore.adapters.cli.common import err

PLAIN_EVERY = 5.0  # seconds between plain progress lines


@contextmanager
def progress(label: str, unit: str) -> Iterator[Callable[[float, float | None], None]]:
    """A function to call with (done, total or None) as the work goes on."""
    if err.is_terminal:
        columns = (
            TextColumn("{task.description}"), BarColumn(),
            TextColumn("{task.completed:,.0f}" + (f" {unit}" if unit else "")),
            TimeElapsedColumn(),
        )  # fmt: skip
        with Progress(*columns, console=err, transient=True) as bar:
            task = bar.add_task(label, total=None)

            def redraw(done: float, total: float | None) -> None:
                bar.update(task, completed=done, total=total)

            yield redraw
        return
    last = [time.monotonic()]

    def line(done: float, total: float | None) -> None:
        now = time.monotonic()
        finished = total is not None and done >= total
        if now - last[0] < PLAIN_EVERY and not finished:
            return
        last[0] = now
        of = f" of {_number(total)}" if total is not None else ""
        err.print(f"{label}: {_number(done)}{of} {unit}".rstrip(), highlight=False)

    yield line


def _number(value: float) -> str:
    """A count as a count, a part of a second to a tenth."""
    return f"{value:,.0f}" if value == int(value) or value >= 100 else f"{value:.1f}"
