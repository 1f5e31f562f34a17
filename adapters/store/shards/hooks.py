"""The sharded store's hooks: each routed to the server holding its context (generated in
routed_hooks.py), and `watch`, which follows one server or all of them."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from uuid import UUID

from ctxstore.adapters.storage.notifications import Wake
from ctxstore.adapters.store.hooks import StoreHooks
from ctxstore.adapters.store.shards.routed_hooks import RoutedHooks

if TYPE_CHECKING:
    from ctxstore.adapters.store.shards.store import ShardedStore


class ShardedHooks(RoutedHooks, StoreHooks):
    """The hooks of a sharded store's servers, as one store's."""

    def __init__(self, sharded: ShardedStore) -> None:
        self._sharded = sharded

    def _route(self, name: str, context_id: Any, *args: Any, **kwargs: Any) -> Any:
        return self._sharded._on_holder(
            context_id, lambda store: getattr(store.hooks, name), *args, **kwargs
        )

    def watch(self, wake: Wake, context_id: UUID | str | None = None) -> Callable[[], None]:
        """Call `wake` whenever events are stored on any server (or on the server holding
        `context_id`, for its events) until the returned function is called."""
        if context_id is not None:
            return self._sharded.store_of(context_id).hooks.watch(wake, context_id)
        stops = [s.hooks.watch(wake) for s in self._sharded.stores.values()]

        def stop() -> None:
            for each in stops:
                each()

        return stop


__all__ = ["ShardedHooks"]
