"""What a store is built from, for the faces built on it (the async store drives the same
core, writer and commands as the store it wraps, through these and nothing private)."""

from __future__ import annotations

from dataclasses import dataclass

from ctxstore.adapters.storage.events import EventStorage
from ctxstore.adapters.store.commands import Commands
from ctxstore.adapters.store.core import StoreCore
from ctxstore.adapters.store.writer import Writer


@dataclass(frozen=True)
class StoreParts:
    """The parts of a store another face drives: shared state, writer, commands, storage."""

    core: StoreCore
    writer: Writer
    commands: Commands
    storage: EventStorage


__all__ = ["StoreParts"]
