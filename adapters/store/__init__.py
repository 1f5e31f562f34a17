"""The store: the facade every caller uses (`ContextStore`), and the modules it composes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ctxstore.adapters.store.facade import ContextStore

__all__ = ["ContextStore"]


def __getattr__(name: str) -> Any:
    # `from ctxstore.adapters.store import ContextStore` keeps working (it was a module);
    # imported when asked for, so the store's own modules import without the facade.
    if name == "ContextStore":
        from ctxstore.adapters.store.facade import ContextStore

        return ContextStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
