"""The neutral deltas a streamed reply is stored in (domain/streaming.py lists them): their
kinds, and a call's fields, as each shape's stream reads and applies them."""

from __future__ import annotations

from typing import Any

from ctxstore.domain.errors import InvalidOperationError

JSON = dict[str, Any]
KINDS = ("text", "reasoning", "signature", "refusal", "call", "block", "citation", "part")


def kind_of(d: JSON) -> str:
    """The kind of a neutral delta."""
    return next(k for k in KINDS if k in d)


def check_call(call: JSON, n: int) -> None:
    """Refuse a call delta whose fields are not a call's, naming delta `n`."""
    extra = set(call) - {"index", "id", "name", "arguments"}
    if extra:
        raise InvalidOperationError(f"delta {n}: a call has index, id, name, arguments: {extra}")
    for key in ("id", "name", "arguments"):
        if key in call and not isinstance(call[key], str):
            raise InvalidOperationError(f"delta {n}: a call's {key} must be a string")
    index = call.get("index", 0)
    if isinstance(index, bool) or not isinstance(index, int) or index < 0:
        raise InvalidOperationError(f"delta {n}: a call's index must be a non-negative integer")
