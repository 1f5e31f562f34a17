"""The HTTP service (`ctxstore serve`): the facade over HTTP, for SDKs in any language."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ctxstore.adapters.http.app import create_app

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    # The app is imported when asked for, not with the package: the store's erasure uses
    # the idempotency keys module here, and the app imports the erasure module.
    if name == "create_app":
        from ctxstore.adapters.http.app import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
