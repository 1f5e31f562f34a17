"""What every integration does with the surface it is given, whichever it is: the two faces
it runs on and the bridge that awaits an operation on either, and its own keys (the context
a key names is found through the surface, which scopes it to the caller's tenant; listings
are paged: a service answers at most MAX_PAGE contexts a request)."""

from __future__ import annotations

import asyncio
import inspect
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator
from typing import NamedTuple, Protocol, TypeGuard, TypeVar, cast
from uuid import UUID

from ctxstore.adapters.store.contract import ContextOperations
from ctxstore.adapters.store.contract_async import AsyncContextOperations
from ctxstore.adapters.store.hooks import StoreHooks
from ctxstore.adapters.store.results import ContextSummary
from ctxstore.adapters.threads.settled import settled, settled_await
from ctxstore.domain.context import JSON
from ctxstore.domain.errors import InvalidOperationError

PAGE = 1000  # contexts read per request
K = TypeVar("K")
V = TypeVar("V")
T = TypeVar("T")


class LRU(OrderedDict[K, V]):
    """A dict that forgets its least recently set keys past `most`."""

    def __init__(self, most: int) -> None:
        super().__init__()
        self.most = most

    def __setitem__(self, key: K, value: V) -> None:
        super().__setitem__(key, value)
        self.move_to_end(key)
        while len(self) > self.most:
            self.popitem(last=False)


class AwaitedStore(AsyncContextOperations, Protocol):
    """An async store (ctxstore.aopen): the contract awaited, its sync twin over the same
    storage and cache, and its read of the visible messages as stored JSON (no Message
    built), which the contract leaves out (the HTTP client has none)."""

    @property
    def sync(self) -> ContextOperations: ...

    async def visible_messages(
        self, context_id: UUID | str, *, last: int | None = None, inline: bool = False
    ) -> list[JSON]: ...


def _awaited(given: ContextOperations | AsyncContextOperations) -> TypeGuard[AwaitedStore]:
    """Whether `given` is an async store: the one surface with a sync twin. (Asked of the
    attribute: a runtime-checked protocol took 15 µs, and capture asks for every run.)"""
    return hasattr(given, "sync")


class Faces(NamedTuple):
    """The faces an integration runs on: the sync one, called on worker threads, and the
    async one, awaited on the loop, when it was given an async store."""

    sync: ContextOperations
    awaited: AwaitedStore | None

    async def read(
        self,
        on_thread: Callable[[ContextOperations], T],
        on_loop: Callable[[AwaitedStore], Awaitable[T]],
    ) -> T:
        """A read, awaited on the async face when there is one, else run on a worker thread
        (a cancelled read is let go: it changes nothing)."""
        if self.awaited is not None:
            return await on_loop(self.awaited)
        return await asyncio.to_thread(on_thread, self.sync)

    async def write(
        self,
        on_thread: Callable[[ContextOperations], T],
        on_loop: Callable[[AwaitedStore], Awaitable[T]],
    ) -> T:
        """A write, as `read`, settled through cancellations (adapters/threads/settled.py):
        a cancelled caller learns of it once the write is stored or refused."""
        if self.awaited is not None:
            return await settled_await(on_loop(self.awaited))
        return await settled(on_thread, self.sync)


def faces(given: ContextOperations | AsyncContextOperations) -> Faces:
    """The faces of the surface an integration is given. An async store (ctxstore.aopen)
    offers its sync twin over the same storage and cache; any other surface (the store, the
    client, the sharded store) is the sync face. An async surface without a twin is refused:
    the integrations' work on threads needs one."""
    if _awaited(given):
        return Faces(given.sync, given)
    # (capture hands on surfaces that open the store when first used: `insert` may be absent)
    if inspect.iscoroutinefunction(getattr(given, "insert", None)):
        raise InvalidOperationError(
            f"{type(given).__name__} is an async surface without a sync twin (`sync`): "
            "give the integration ctxstore.aopen()'s store, or a sync surface"
        )
    return Faces(cast(ContextOperations, given), None)


def hooks_of(store: ContextOperations) -> StoreHooks | None:
    """The hooks of a surface that holds events itself (the store, the sharded store): its
    cheap head mark and its stored messages without building the visible context. None
    over HTTP, where an integration reads through the contract."""
    return cast("StoreHooks | None", getattr(store, "hooks", None))


def listed_contexts(
    store: ContextOperations, search: str | None = None
) -> Iterator[ContextSummary]:
    """Every context the surface lists (those whose name or id contains `search`, if
    given), in creation order, a page at a time."""
    after: UUID | None = None
    while True:
        page = store.contexts(limit=PAGE, search=search, after=after)
        yield from page
        if len(page) < PAGE:
            return
        after = page[-1].context_id


def named_contexts(store: ContextOperations, prefix: str) -> Iterator[ContextSummary]:
    """The contexts (of the caller's tenant, on a service) whose names start with `prefix`,
    in creation order."""
    for c in listed_contexts(store, prefix):
        if c.name is not None and c.name.startswith(prefix):
            yield c


__all__ = [
    "LRU", "PAGE", "AwaitedStore", "Faces", "faces", "hooks_of", "listed_contexts",
    "named_contexts",
]  # fmt: skip
