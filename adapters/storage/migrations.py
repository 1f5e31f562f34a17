"""Versioned schema: ordered migrations per backend, recorded in `ctxstore_migrations`.

A store's schema version is the highest migration recorded. `setup()` (`ctxstore migrate`)
applies the ones not yet recorded, in order, each once. Opening a store at the current
version runs no DDL at all; at an older version (or a database from before versions were
recorded) the store applies what is missing when its role may (SQLite, memory://, the
owner of PostgreSQL tables) and otherwise refuses, naming the command to run as the owner;
at a newer version it refuses: an older release must not write to a newer schema.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ctxstore.domain.errors import StoreUnavailableError

TABLE = "ctxstore_migrations"


@dataclass(frozen=True)
class Migration:
    """One schema change: `apply(backend, events recorder, snapshots recorder)` runs its DDL,
    idempotently (IF NOT EXISTS), so a database from before versions were recorded upgrades
    in place."""

    version: int
    description: str
    apply: Callable[[Any, Any, Any], None]


def current(migrations: Sequence[Migration]) -> int:
    return migrations[-1].version if migrations else 0


def pending(migrations: Sequence[Migration], found: int | None) -> list[Migration]:
    """The migrations to apply to a schema at version `found`; raises StoreUnavailableError
    for a schema newer than this release knows."""
    now = found or 0
    latest = current(migrations)
    if now > latest:
        raise StoreUnavailableError(
            f"the store's schema is at version {now}, newer than this release's {latest}: "
            "upgrade ctxstore to open it"
        )
    return [m for m in migrations if m.version > now]


def refuse_outdated(found: int | None, migrations: Sequence[Migration]) -> None:
    """Raise for a schema this role may not upgrade (or a read will not create)."""
    if not found:
        raise StoreUnavailableError(
            "the store has no schema yet (an empty database; a read never creates one): run "
            "`ctxstore migrate` as the role that will own its tables"
        )
    raise StoreUnavailableError(
        f"the store's schema is at version {found or 0} and this release needs "
        f"{current(migrations)}; run `ctxstore migrate` as the owner of its tables"
    )
