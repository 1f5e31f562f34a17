"""What callers give becomes a message: one message or a batch, in the shape given or
detected, checked and validated into a Message, or straight into its stored form where a
plain message is checked as well by hand (the write path's common case), and free-form
JSON objects (metadata, stats). The model itself is in domain/messages.py."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, get_args

from pydantic import (
    ConfigDict,
    JsonValue,
    TypeAdapter,
    ValidationError,
)

from ctxstore.domain.errors import CtxStoreError, InvalidMessageError, InvalidOperationError
from ctxstore.domain.json_values import json_problem
from ctxstore.domain.messages import MAX_ID, Message, NativeFormat, Role
from ctxstore.domain.plain import as_plain_tree
from ctxstore.domain.shapes import (
    CHAT,
    FORMATS,
    SHAPES,
    detect,
    detect_batch,
    read_native,
    shape_named,
)

_JSON_OBJECT: TypeAdapter[dict[str, JsonValue]] = TypeAdapter(
    dict[str, JsonValue], config=ConfigDict(allow_inf_nan=False)
)


def is_one_message(value: Any) -> bool:
    """Whether a value is one message (not a list of them): a dict, a Message, or an SDK's
    pydantic message object."""
    if type(value) is list:  # (the common case: a batch, asked of every insert's checks)
        return False
    return isinstance(value, Message | dict) or callable(getattr(value, "model_dump", None))


def parse_batch(messages: Any, shape: str | None = None) -> list[Message]:
    """One message or a non-empty list of them, each in the shape given or detected (a
    plain message takes the batch's one native shape: shapes.detect_batch); raises
    InvalidOperationError or InvalidMessageError."""
    batch, shapes = _batch(messages, shape)
    return [parse_message(m, s) for m, s in zip(batch, shapes, strict=True)]


def stored_batch(messages: Any, shape: str | None = None) -> list[dict[str, Any]]:
    """What `[m.stored() for m in parse_batch(messages, shape)]` gives, refusing alike,
    without building a Message where a plain chat message or a native payload is checked
    as well by hand (the write path's common case: a model and its dump cost more than
    the rest of the checks together)."""
    batch, shapes = _batch(messages, shape)
    return [_stored(m, s) for m, s in zip(batch, shapes, strict=True)]


def _batch(messages: Any, shape: str | None) -> tuple[Sequence[Any], list[str | None]]:
    if is_one_message(messages):
        messages = [messages]
    if isinstance(messages, str) or not isinstance(messages, Sequence) or not messages:
        kind = type(messages).__qualname__
        raise InvalidOperationError(
            f"insert needs a message or a non-empty list of messages, got {kind}"
        )
    shapes: list[str | None] = [shape] * len(messages) if shape else detect_batch(list(messages))
    return messages, shapes


def parse_message(data: Message | dict[str, Any], shape: str | None = None) -> Message:
    """Validate one message, in the shape given (`openai-chat`, `openai-responses`,
    `anthropic`) or the one detected; raises InvalidMessageError naming every problem.
    A native payload is kept exactly as it came; the stored form ({"format", "native",
    ...}, as visible contexts return it) is accepted too."""
    if isinstance(data, Message):
        return data
    plain, found, stored_form = _read(data, shape)
    if SHAPES[found].native:
        plain = {"role": read_native(plain, found).role, "format": found, "native": plain}
    return _validated(plain, found, stored_form)


def _stored(data: Message | dict[str, Any], shape: str | None) -> dict[str, Any]:
    """parse_message(data, shape).stored(), through a Message only when the checks by
    hand (below) cannot vouch for the message."""
    if isinstance(data, Message):
        return data.stored()
    plain, found, stored_form = _read(data, shape)
    if SHAPES[found].native:
        role = read_native(plain, found).role
        held = _native_stored(plain, found, role)
        if held is not None:
            return held
        plain = {"role": role, "format": found, "native": plain}
    else:
        held = _given_stored(plain) if stored_form else _chat_stored(plain)
        if held is not None:
            return held
    return _validated(plain, found, stored_form).stored()


def _read(data: Any, shape: str | None) -> tuple[dict[str, Any], str, bool]:
    """A message's plain JSON, checked storable; its shape; whether it came in the stored
    form. Raises InvalidMessageError."""
    given = data
    data = as_plain_tree(data)
    if not isinstance(data, dict):
        data = given
        name = type(data).__qualname__
        where = type(data).__module__
        kind = name if where == "builtins" else f"{where}.{name}"
        raise InvalidMessageError(
            f"a message must be a JSON object (or an SDK's message object), got {kind}"
        )
    problem = json_problem(data)
    if problem is not None:
        raise InvalidMessageError(f"invalid message: {problem}")
    stored_form = "native" in data and "format" in data
    if shape is not None and shape_named(shape) is None:
        raise InvalidMessageError(f"format must be one of {', '.join(FORMATS)}: {shape!r}")
    found = CHAT if stored_form else shape or detect(data)
    if not stored_form and not SHAPES[found].native:
        unknown = _unrecognised(data)
        if unknown is not None:
            raise InvalidMessageError(unknown)
    return data, found, stored_form


def _validated(data: dict[str, Any], found: str, stored_form: bool) -> Message:
    try:
        return Message.model_validate(data)
    except ValidationError as exc:
        what = "stored" if stored_form else found
        raise InvalidMessageError(f"invalid {what} message: {_describe(exc)}") from exc


ROLES = frozenset(get_args(Role))
# A chat message of these roles with string content needs nothing but its fields' types
# checked (a tool or function message names what it answers: the model checks those).
_PLAIN_ROLES = frozenset({"system", "developer", "user", "assistant"})
_PLAIN_FIELDS = ("id", "role", "content", "name", "metadata")  # in Message's field order
_GIVEN_FIELDS = frozenset({"id", "role", "format", "native", "metadata"})
_NATIVE_FORMATS = frozenset(get_args(NativeFormat))


def _chat_stored(data: dict[str, Any]) -> dict[str, Any] | None:
    """The stored form of a plain chat message — a role above, string content, and at most
    an id, a name and metadata — as Message(**data).stored() gives it; None for any other
    message (the model then checks it and names what is wrong)."""
    role = data.get("role")
    if type(role) is not str or role not in _PLAIN_ROLES or type(data.get("content")) is not str:
        return None
    for key, value in data.items():
        if key == "id":
            if type(value) is not str or not 0 < len(value) <= MAX_ID:
                return None
        elif key == "name":
            if type(value) is not str:
                return None
        elif key == "metadata":
            if type(value) is not dict:
                return None
        elif key != "role" and key != "content":
            return None
    held = {k: data[k] for k in _PLAIN_FIELDS if k in data}
    if held.get("metadata"):
        try:
            held["metadata"] = _JSON_OBJECT.validate_python(held["metadata"])
        except ValidationError:
            return None
    held.setdefault("id", None)
    return held


def _given_stored(data: dict[str, Any]) -> dict[str, Any] | None:
    """A message given in the stored form ({"role", "format", "native"}, and at most an id
    and metadata: what visible contexts return, and what the SDK sessions write) as the
    Message it makes stores it; None for any other (the model names what is wrong). The
    fields are checked before the payload is read, as the model does."""
    for key, value in data.items():
        if key == "id":
            if type(value) is not str or not 0 < len(value) <= MAX_ID:
                return None
        elif key == "metadata":
            if type(value) is not dict:
                return None
        elif key not in _GIVEN_FIELDS:
            return None
    role, found = data.get("role"), data.get("format")
    if type(found) is not str or found not in _NATIVE_FORMATS or type(data["native"]) is not dict:
        return None
    held = _native_stored(data["native"], found, role)
    if held is None:
        return None
    held["id"] = data.get("id")
    if "metadata" in data:
        try:
            held["metadata"] = _JSON_OBJECT.validate_python(data["metadata"])
        except ValidationError:
            return None
    try:
        if SHAPES[found].read(held["native"]).role != role:
            return None
    except CtxStoreError:
        return None
    return held


def _native_stored(payload: dict[str, Any], found: str, role: Any) -> dict[str, Any] | None:
    """The stored form of a native payload whose shape read it as `role`, as the Message
    holding it gives it; None when the payload is not plain JSON (the model names why)."""
    if type(role) is not str or role not in ROLES:
        return None
    try:
        native = _JSON_OBJECT.validate_python(payload)
    except ValidationError:
        return None
    return {"id": None, "role": role, "format": found, "native": native, "metadata": {}}


def _unrecognised(data: dict[str, Any]) -> str | None:
    """Why a dict read as a chat message is no message of a shape this store keeps, naming
    what was seen; None when it has a chat message's role."""
    if data.get("role") == "model" or "parts" in data:
        return (
            f"not a Gemini Content: role {data.get('role')!r} (user or model) with 'parts' "
            f"(a list of parts); keys seen: {_keys(data)}"
        )
    if "role" not in data:
        return (
            "not a message of any shape kept: no 'role' (openai-chat, anthropic), no 'parts' "
            f"(gemini) and no item 'type' (openai-responses); keys seen: {_keys(data)}"
        )
    return None


def _keys(data: dict[str, Any]) -> str:
    return ", ".join(repr(k) for k in list(data)[:8]) or "none"


def parse_json_object(value: Any, what: str) -> dict[str, Any]:
    """A plain JSON object (metadata, stats); raises InvalidOperationError otherwise."""
    problem = json_problem(value)
    if problem is not None:
        raise InvalidOperationError(f"{what} must be a JSON object: {problem}")
    try:
        return _JSON_OBJECT.validate_python(value)
    except ValidationError as exc:
        raise InvalidOperationError(f"{what} must be a JSON object: {_describe(exc)}") from exc


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = list(err["loc"])
        if loc[:1] == ["tool_calls"] and len(loc) > 3 and loc[2] in ("function", "custom"):
            del loc[2]  # the kind of call the union chose: its fields already say which
        where = ".".join(str(p) for p in loc) or "message"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)


__all__ = [
    "ROLES",
    "is_one_message",
    "parse_batch",
    "parse_json_object",
    "parse_message",
    "stored_batch",
]
