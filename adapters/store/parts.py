"""What a store is built from, for the faces built on it (the async store drives the same
core, writer and commands as the store it wraps; the sharded store moves contexts between
stores' storage). Reached through `parts_of`, never as a public name of the store: what is
here can write beside the chain's writer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ctxstore.adapters.storage.events import EventStorage
from ctxstore.adapters.store.commands import Commands
from ctxstore.adapters.store.core import StoreCore
from ctxstore.adapters.store.writer import Writer

if TYPE_CHECKING:
    from ctxstore.adapters.store.facade import ContextStore


@dataclass(frozen=True)
class StoreParts:
    """The parts of a store another face drives: shared state, writer, commands, storage."""

    core: StoreCore
    writer: Writer
    commands: Commands
    storage: EventStorage


def parts_of(store: ContextStore) -> StoreParts:
    """The parts `store` was built from."""
    return store._parts


__all__ = ["StoreParts", "parts_of"]
