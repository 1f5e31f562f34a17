"""Every failure of the database reaches the caller as a typed error.

The facade's public methods (and the iterators some return) are wrapped once: an error of
the eventsourcing library, psycopg or sqlite3 (an outage, a full disk, a read-only file, a
damaged page, a lock not granted in time) becomes `StoreUnavailableError`, with the cause
in its message and chained as `__cause__`. Errors ctxstore raises on purpose pass as they are.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Generator, Iterator
from typing import Any, TypeVar

from ctxstore.adapters.storage.backend import driver_errors
from ctxstore.domain.errors import CtxStoreError, StoreUnavailableError

T = TypeVar("T")


def fault(exc: BaseException) -> StoreUnavailableError:
    cause = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return StoreUnavailableError(f"the store failed: {type(exc).__name__}: {cause}"[:500])


def _typed_iterator(found: Iterator[Any]) -> Generator[Any, None, None]:
    try:
        yield from found
    except CtxStoreError:
        raise
    except driver_errors() as exc:
        raise fault(exc) from exc


def typed(fn: Callable[..., T]) -> Callable[..., T]:
    """`fn` with database faults raised as StoreUnavailableError."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            result = fn(*args, **kwargs)
        except CtxStoreError:
            raise
        except driver_errors() as exc:
            raise fault(exc) from exc
        if isinstance(result, Iterator) and not isinstance(result, str | bytes):
            return _typed_iterator(result)
        return result

    return run


def type_faults(cls: type[T]) -> type[T]:
    """Wrap every public method of a class with `typed` (a class decorator)."""
    for name, member in list(vars(cls).items()):
        if (
            name.startswith("_")
            or isinstance(member, staticmethod | classmethod | property | type)
            or not callable(member)
        ):
            continue
        setattr(cls, name, typed(member))
    return cls
