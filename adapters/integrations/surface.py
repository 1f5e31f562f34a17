"""What every integration does with the surface it is given, whichever it is: the two faces
it runs on, and its own keys (the context a key names is found through the surface, which
scopes it to the caller's tenant; listings are paged: a service answers at most MAX_PAGE
contexts a request)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from typing import Any, TypeVar

from ctxstore.adapters.store.contract import ContextOperations
from ctxstore.adapters.store.results import ContextSummary

PAGE = 1000  # contexts read per request
K = TypeVar("K")
V = TypeVar("V")


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


def faces(given: Any) -> tuple[ContextOperations, Any]:
    """(the face an integration calls on threads, the async face it awaits on the loop or
    None). An async store (ctxstore.aopen) offers its sync twin over the same storage and
    cache; any other surface (the store, the client, the sharded store) is the sync face."""
    twin = getattr(given, "sync", None)
    return (given, None) if twin is None else (twin, given)


def listed_contexts(
    store: ContextOperations, search: str | None = None
) -> Iterator[ContextSummary]:
    """Every context the surface lists (those whose name or id contains `search`, if
    given), in creation order, a page at a time."""
    after: Any = None
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


__all__ = ["LRU", "PAGE", "faces", "listed_contexts", "named_contexts"]
