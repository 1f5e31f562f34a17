"""Every failure of the database reaches the caller as a typed error.

Every surface's public methods (and the iterators some return; coroutines and async
iterators alike) are wrapped once, inherited ones included: an error of
the eventsourcing library, psycopg or sqlite3 (an outage, a full disk, a read-only file, a
damaged page, a lock not granted in time) becomes `StoreUnavailableError`, with the cause
in its message and chained as `__cause__`. Errors ctxstore raises on purpose pass as they are.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Generator,
    Iterator,
)
from typing import Any, TypeVar

from ctxstore.adapters.storage.backend import driver_errors
from ctxstore.domain.errors import (
    CtxStoreError,
    OutcomeUnknownError,
    StoreUnavailableError,
    first_line,
)

T = TypeVar("T")


def fault(exc: BaseException, owner: Any = None) -> StoreUnavailableError:
    """The typed error for a database fault; `owner`, the store whose method met it, names
    a SQLite file that cannot be written (the driver's message does not)."""
    cause = first_line(exc)
    url = getattr(owner, "url", None)
    if isinstance(url, str) and url.startswith("sqlite:///") and "readonly database" in cause:
        return StoreUnavailableError(
            f"the SQLite file {url.removeprefix('sqlite:///')} cannot be written ({cause}):"
            " make it and its folder writable, or choose another with --url or CTXSTORE_URL"
        )
    return StoreUnavailableError(f"the store failed: {type(exc).__name__}: {cause}"[:500])


def _typed_iterator(found: Iterator[Any]) -> Generator[Any, None, None]:
    try:
        yield from found
    except CtxStoreError:
        raise
    except driver_errors() as exc:
        raise fault(exc) from exc


def typed(fn: Callable[..., T]) -> Callable[..., T]:
    """`fn` with database faults raised as StoreUnavailableError (a coroutine function's
    and an async generator's too)."""
    if getattr(fn, "__typed__", False):
        return fn
    if inspect.isasyncgenfunction(fn):
        return _typed_async_iterator(fn)
    if inspect.iscoroutinefunction(fn):
        return _typed_coroutine(fn)  # type: ignore[return-value]

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            result = fn(*args, **kwargs)
        except StoreUnavailableError as exc:  # a refusal the writer settled: name the file
            cause = exc.__cause__
            if not isinstance(exc, OutcomeUnknownError) and isinstance(cause, driver_errors()):
                named = fault(cause, args[0] if args else None)
                if "cannot be written" in str(named):
                    raise named from cause
            raise
        except CtxStoreError:
            raise
        except driver_errors() as exc:
            raise fault(exc, args[0] if args else None) from exc
        if isinstance(result, Iterator) and not isinstance(result, str | bytes):
            return _typed_iterator(result)
        if isinstance(result, AsyncIterator):
            return _typed_aiter(result)
        return result

    run.__typed__ = True  # type: ignore[attr-defined]
    return run


def _typed_coroutine(fn: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(fn)
    async def run(*args: Any, **kwargs: Any) -> Any:
        try:
            result = await fn(*args, **kwargs)
        except CtxStoreError:
            raise
        except driver_errors() as exc:
            raise fault(exc, args[0] if args else None) from exc
        if isinstance(result, Iterator) and not isinstance(result, str | bytes):
            return _typed_iterator(result)
        return result

    run.__typed__ = True  # type: ignore[attr-defined]
    return run


def _typed_async_iterator(fn: Callable[..., AsyncIterator[Any]]) -> Callable[..., Any]:
    @functools.wraps(fn)
    async def run(*args: Any, **kwargs: Any) -> AsyncGenerator[Any, None]:
        async for item in _typed_aiter(fn(*args, **kwargs)):
            yield item

    run.__typed__ = True  # type: ignore[attr-defined]
    return run


async def _typed_aiter(found: AsyncIterator[Any]) -> AsyncGenerator[Any, None]:
    try:
        async for item in found:
            yield item
    except CtxStoreError:
        raise
    except driver_errors() as exc:
        raise fault(exc) from exc
    finally:
        close = getattr(found, "aclose", None)
        if close is not None:
            await close()


def public_methods(cls: type) -> dict[str, Any]:
    """The public methods of a class, its bases' included (mixins, a Protocol's defaults):
    name -> the function the class resolves it to."""
    found: dict[str, Any] = {}
    for name in dir(cls):
        if name.startswith("_"):
            continue
        member = inspect.getattr_static(cls, name)
        if isinstance(member, staticmethod | classmethod | property | type):
            continue
        if inspect.isfunction(member):
            found[name] = member
    return found


def type_faults(cls: type[T]) -> type[T]:
    """Wrap every public method of a class, inherited ones included, with `typed` (a class
    decorator): a database fault leaves none of them untyped."""
    for name, member in public_methods(cls).items():
        setattr(cls, name, typed(member))
    return cls
