"""A session's writes awaited through cancellations: a write on a thread (or an awaited
insert) cannot be stopped halfway, so a cancelled caller learns of its cancellation once
the write is stored or refused, never while it may still land."""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


async def settled(fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` run on a worker thread (as `asyncio.to_thread`), awaited through
    cancellations: a write on a thread cannot be stopped halfway, so the caller learns of
    its cancellation once the write has ended. The executor's future is awaited as it is:
    a task wrapping `asyncio.to_thread` cost ~30 µs more per call."""
    loop = asyncio.get_running_loop()
    return await settled_await(
        loop.run_in_executor(None, functools.partial(contextvars.copy_context().run, fn, *args))
    )


async def settled_await(awaitable: Awaitable[T]) -> T:
    """An awaited write (a future or a coroutine), run to its end through cancellations:
    the caller learns of a cancellation once the write is stored or refused."""
    task = asyncio.ensure_future(awaitable)
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError as exc:
            cancelled = cancelled or exc
    try:
        result = task.result()
    except BaseException:
        if cancelled is not None:
            raise cancelled from None
        raise
    if cancelled is not None:
        raise cancelled
    return result


__all__ = ["settled", "settled_await"]
