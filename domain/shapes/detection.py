"""Which shape a message dict is in, when the caller does not say: a native shape by what
only it has, chat otherwise (a plain {"role", "content"} reads the same in every shape)."""

from __future__ import annotations

from typing import Any

from ctxstore.domain.errors import InvalidMessageError
from ctxstore.domain.shapes.names import CHAT
from ctxstore.domain.shapes.registry import READ_ORDER, SHAPES
from ctxstore.domain.shapes.responses import RESPONSES_TYPES


def detect(data: dict[str, Any]) -> str:
    """The shape of a message dict (see the module); raises InvalidMessageError for an item
    type no shape has."""
    if "type" not in data and "parts" not in data and type(data.get("content")) is str:
        # No shape's mark can be there (a native shape is told by its `type`, a Gemini
        # Content by its `parts`, an Anthropic message by blocks in a list): most messages.
        return CHAT
    return by_marks(data)


def by_marks(data: dict[str, Any]) -> str:
    """detect's answer from each shape's own marks, in READ_ORDER."""
    for shape in READ_ORDER:
        if shape.by_type(data):
            return shape.name
    for shape in READ_ORDER:
        if shape.by_content(data):
            return shape.name
    kind = data.get("type")
    if isinstance(kind, str) and kind != "message":
        raise InvalidMessageError(
            f"not a chat message, a Responses item or an Anthropic message: type {kind!r} "
            f"(Responses item types: {', '.join(sorted(RESPONSES_TYPES))})"
        )
    return CHAT


def detect_batch(messages: list[Any]) -> list[str | None]:
    """The shape of each message of one insert: a message that reads the same in every
    shape (a plain {"role", "content"}) takes the batch's one native shape, if it has one;
    None for what is not a dict (validation names it)."""
    shapes = [detect(m) if isinstance(m, dict) and "native" not in m else None for m in messages]
    natives = {s for s in shapes if s is not None and SHAPES[s].native}
    if len(natives) != 1:
        return shapes
    (batch,) = natives
    taker = SHAPES[batch]
    return [
        batch if s is not None and not SHAPES[s].native and taker.takes_plain(m) else s
        for s, m in zip(shapes, messages, strict=True)
    ]
