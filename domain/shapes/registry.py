"""The shapes by name, in order: where callers find the shape of a message or of a name.

A chat message is stored as its fields (no `format`); a message of any other shape as
{"format": <its shape's name>, "native": <the payload>} (domain/shapes/__init__.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from ctxstore.domain.errors import InvalidMessageError
from ctxstore.domain.shapes.anthropic import AnthropicShape
from ctxstore.domain.shapes.base import JSON, Native, Shape
from ctxstore.domain.shapes.chat import ChatShape
from ctxstore.domain.shapes.gemini import GeminiShape
from ctxstore.domain.shapes.responses import ResponsesShape

if TYPE_CHECKING:
    from ctxstore.domain.messages import Message

_CHAT, _RESPONSES, _ANTHROPIC, _GEMINI = (
    ChatShape(), ResponsesShape(), AnthropicShape(), GeminiShape(),
)  # fmt: skip
SHAPES: dict[str, Shape] = {s.name: s for s in (_CHAT, _RESPONSES, _ANTHROPIC, _GEMINI)}
FORMATS = tuple(SHAPES)  # every shape's name, chat first
NATIVE = tuple(name for name, s in SHAPES.items() if s.native)  # kept as their payload
# Shapes whose next user turn answers every call of a turn at once.
ANSWERED_AT_ONCE = tuple(name for name, s in SHAPES.items() if s.answers_at_once)
# The order a dict or a stream event of no named shape is tried in: a shape whose marks
# another shape's may share first (an Anthropic response's `message` type is a Responses
# item type too), chat, which reads what is left, last.
READ_ORDER = (_ANTHROPIC, _RESPONSES, _GEMINI, _CHAT)
CHAT_SHAPE: Shape = _CHAT


def shape_named(name: str | None) -> Shape | None:
    """The shape of that name (None: no such shape)."""
    return SHAPES.get(name) if name is not None else None


def message_shape(m: Message) -> Shape:
    """The shape of a Message (its format; chat without one)."""
    return SHAPES[m.format] if m.format is not None else _CHAT


def stored_shape(message: Mapping[str, Any]) -> tuple[Shape, JSON]:
    """The shape of a message as stored (JSON), and the payload it reads: the native payload
    (raises InvalidMessageError for a format no shape has), or the chat message itself."""
    native = message.get("native")
    if native is None:
        return _CHAT, cast(JSON, message)  # (read, never changed)
    name = message.get("format")
    found = SHAPES.get(name) if isinstance(name, str) else None
    if found is None or not found.native:
        raise _unknown(name)
    return found, native


def read_native(payload: dict[str, Any], shape: str) -> Native:
    """The store's view of a native payload; raises InvalidMessageError naming what is
    missing or unknown."""
    found = SHAPES.get(shape)
    if found is None or not found.native:
        raise _unknown(shape)
    return found.read(payload)


def texts_of(payload: dict[str, Any], shape: str) -> list[str]:
    """The texts of a native payload a model reads (for counting and previews)."""
    found = SHAPES.get(shape)
    if found is None or not found.native:
        raise _unknown(shape)
    return found.texts(payload)


def _unknown(shape: Any) -> InvalidMessageError:
    return InvalidMessageError(f"format must be one of {', '.join(FORMATS)}, not {shape!r}")
