"""What every integration does with its own keys, on any surface: find the context a key
names without creating it, and list the contexts whose names start with a prefix, page by
page (a service answers at most MAX_PAGE contexts a request)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ctxstore.adapters.store.contract import ContextOperations
from ctxstore.adapters.store.results import ContextSummary

PAGE = 1000  # contexts read per request


def named_contexts(store: ContextOperations, prefix: str) -> Iterator[ContextSummary]:
    """The contexts (of the caller's tenant, on a service) whose names start with `prefix`,
    in creation order."""
    after: Any = None
    while True:
        page = store.contexts(limit=PAGE, search=prefix, after=after)
        for c in page:
            if c.name is not None and c.name.startswith(prefix):
                yield c
        if len(page) < PAGE:
            return
        after = page[-1].context_id


__all__ = ["PAGE", "named_contexts"]
