"""The facade's operations that a part of it holds: each a method of the facade (so the
faults' typing, tracing and the generated faces see it as the facade's own) that calls the
part's, with the part's signature and documentation."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


def delegated(
    part: str, method: Callable[Concatenate[Any, P], R]
) -> Callable[Concatenate[Any, P], R]:
    """A method calling `method` of the part the facade keeps as attribute `part`."""
    name = method.__name__

    @functools.wraps(method)
    def forward(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> R:
        found: R = getattr(getattr(self, part), name)(*args, **kwargs)
        return found

    return forward


__all__ = ["delegated"]
