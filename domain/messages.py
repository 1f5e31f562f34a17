"""Messages in the OpenAI chat shape, with a stable id and free-form metadata."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, ClassVar, Literal, Self, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    JsonValue,
    SerializerFunctionWrapHandler,
    Tag,
    TypeAdapter,
    ValidationError,
    model_serializer,
    model_validator,
)

from ctxstore.domain.conversions import convert
from ctxstore.domain.errors import CtxStoreError, InvalidMessageError, InvalidOperationError
from ctxstore.domain.json_values import json_problem
from ctxstore.domain.plain import as_plain_tree
from ctxstore.domain.shapes import (
    CHAT,
    FORMATS,
    SHAPES,
    Native,
    detect,
    detect_batch,
    read_native,
    shape_named,
    texts_of,
)
from ctxstore.domain.shapes.chat import stored_call_parts

# NaN and infinities are not JSON: other languages' parsers reject what they would write.
_JSON: TypeAdapter[JsonValue] = TypeAdapter(JsonValue, config=ConfigDict(allow_inf_nan=False))
_JSON_OBJECT: TypeAdapter[dict[str, JsonValue]] = TypeAdapter(
    dict[str, JsonValue], config=ConfigDict(allow_inf_nan=False)
)
MAX_ID = 200  # characters of a message's id

# `function` is the legacy result of an assistant's `function_call` (before tool calls had
# ids): the API still takes both, and the SDK still types them.
Role = Literal["system", "developer", "user", "assistant", "tool", "function"]
NativeFormat = Literal["openai-responses", "anthropic", "gemini"]  # kept as their payload


class ContentPart(BaseModel):
    """One part of a multi-part content: text, image_url, input_audio, file, refusal, ..."""

    model_config = ConfigDict(extra="allow", frozen=True, allow_inf_nan=False)

    type: str = Field(min_length=1)
    text: str | None = None

    @model_validator(mode="after")
    def _text_parts_have_text(self) -> ContentPart:
        if self.type == "text" and self.text is None:
            raise ValueError("a content part of type 'text' needs a 'text' string")
        for value in (self.model_extra or {}).values():
            _JSON.validate_python(value)  # extra fields are stored: plain JSON only
        return self


class JsonExtras(BaseModel):
    """A model keeping the fields a server adds (Gemini's `extra_content` in a tool call,
    a proxy's own keys), as plain JSON: stored, read back and sent back as they came."""

    @model_validator(mode="after")
    def _extras_are_json(self) -> Self:
        for name, value in (self.model_extra or {}).items():
            try:
                _JSON.validate_python(value)
            except ValidationError:
                raise ValueError(f"{name} must be plain JSON") from None
        return self


class FunctionCall(JsonExtras):
    """The function a tool call invokes; arguments stay the JSON string the model wrote."""

    model_config = ConfigDict(extra="allow", frozen=True, allow_inf_nan=False)

    name: str = Field(min_length=1)
    arguments: str = ""


class ToolCall(JsonExtras):
    """A function tool call made by an assistant message."""

    model_config = ConfigDict(extra="allow", frozen=True, allow_inf_nan=False)

    id: str = Field(min_length=1)
    type: Literal["function"] = "function"
    function: FunctionCall

    @property
    def tool_name(self) -> str:
        return self.function.name

    @property
    def tool_input(self) -> str:
        """What the call passes: the function's JSON arguments, as the model wrote them."""
        return self.function.arguments


class CustomCall(JsonExtras):
    """The tool a custom tool call invokes, and its free-form input."""

    model_config = ConfigDict(extra="allow", frozen=True)

    name: str = Field(min_length=1)
    input: str


class CustomToolCall(JsonExtras):
    """A custom tool call (free-form input instead of JSON arguments)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    id: str = Field(min_length=1)
    type: Literal["custom"]
    custom: CustomCall

    @property
    def tool_name(self) -> str:
        return self.custom.name

    @property
    def tool_input(self) -> str:
        """What the call passes: the custom tool's input, as the model wrote it."""
        return self.custom.input


def _call_kind(call: Any) -> str:
    # A call without a type is a function call, as it always was here; any other type is
    # refused naming the two there are.
    kind = call.get("type") if isinstance(call, dict) else getattr(call, "type", None)
    return "function" if kind is None else str(kind)


AnyToolCall = Annotated[
    Annotated[ToolCall, Tag("function")] | Annotated[CustomToolCall, Tag("custom")],
    Discriminator(
        _call_kind,
        custom_error_type="tool_call_type",
        custom_error_message="a tool call's type is 'function' (the default) or 'custom'",
    ),
]


class AudioRef(BaseModel):
    """An assistant's earlier audio reply, referred to by the id the model gave it (what
    the SDK returns beside it — data, transcript, expires_at — is kept, not sent back)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    id: str = Field(min_length=1)

    @model_validator(mode="after")
    def _extras_are_json(self) -> AudioRef:
        for value in (self.model_extra or {}).values():
            _JSON.validate_python(value)
        return self


# What Chat Completions takes back in a request; the rest (annotations, a provider's own
# fields such as reasoning_content) is kept with the message and never sent.
REQUEST_FIELDS = {
    "role", "content", "name", "tool_calls", "tool_call_id", "refusal", "audio", "function_call",
}  # fmt: skip
ADDED_FIELDS = ("annotations", "function_call", "format", "native")  # shown only when set
CHAT_FIELDS = (
    "content", "name", "tool_calls", "tool_call_id", "refusal", "audio", *ADDED_FIELDS,
)  # fmt: skip


class Message(BaseModel):
    """One chat message; `id` is given by the store at insert unless the caller chose one.

    Everything the OpenAI SDK returns for a chat completion is accepted and kept:
    `annotations`, `refusal`, `audio`, the legacy `function_call`, and fields a compatible
    server adds (`reasoning_content`, ...), kept as they came (plain JSON). `to_openai()`
    sends back only what the API takes."""

    model_config = ConfigDict(extra="allow", frozen=True, allow_inf_nan=False)
    ctxstore_message: ClassVar[bool] = True  # (plain.as_plain leaves it as it is)

    id: str | None = Field(default=None, min_length=1, max_length=MAX_ID)
    role: Role
    content: str | list[ContentPart] | None = None
    name: str | None = None
    tool_calls: list[AnyToolCall] | None = None
    tool_call_id: str | None = None
    refusal: str | None = None
    audio: AudioRef | None = None
    annotations: list[dict[str, JsonValue]] | None = None
    function_call: FunctionCall | None = None  # the legacy single call (before tool_calls)
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    # A Responses item, an Anthropic message or a Gemini Content, exactly as it came
    # (domain/shapes/); the chat fields above stay unset and `role` is derived from it.
    format: NativeFormat | None = None
    native: dict[str, JsonValue] | None = None

    @model_serializer(mode="wrap")
    def _without_unset_additions(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Fields added after the first releases appear only when set: a message without
        # them reads exactly as it did (in JSON answers, exports and comparisons).
        dumped: dict[str, Any] = handler(self)
        given = self.model_fields_set
        for name in ADDED_FIELDS if self.format is None else CHAT_FIELDS:
            if dumped.get(name, 0) is None and name not in given:
                del dumped[name]
        return dumped

    @model_validator(mode="after")
    def _provider_fields_are_json(self) -> Message:
        for name, value in (self.model_extra or {}).items():
            try:
                _JSON.validate_python(value)
            except ValidationError:
                raise ValueError(f"{name} must be plain JSON") from None
        return self

    @model_validator(mode="after")
    def _shape_fits_role(self) -> Message:
        if self.format is not None or self.native is not None:
            return self._native_fits()
        if self.tool_calls is not None and self.role != "assistant":
            raise ValueError(f"only assistant messages carry tool_calls, not {self.role}")
        if self.tool_calls is not None:
            if not self.tool_calls:
                raise ValueError("tool_calls, when present, must not be empty")
            call_ids = [c.id for c in self.tool_calls]
            if len(set(call_ids)) != len(call_ids):
                raise ValueError(f"duplicate tool call ids in one message: {call_ids}")
        if self.role == "tool":
            if not self.tool_call_id:
                raise ValueError("a tool message needs the tool_call_id it answers")
            if self.content is None:
                raise ValueError("a tool message needs content")
        elif self.tool_call_id is not None:
            raise ValueError(f"only tool messages carry tool_call_id, not {self.role}")
        if self.role == "function":
            if not self.name:
                raise ValueError("a function message needs the name of the function it answers")
            return self  # (its content may be null, as the API takes it)
        if self.audio is not None and self.role != "assistant":
            raise ValueError(f"only assistant messages carry audio, not {self.role}")
        if self.function_call is not None and self.role != "assistant":
            raise ValueError(f"only assistant messages carry function_call, not {self.role}")
        if self.role == "assistant":
            if (
                self.content is None
                and not self.tool_calls
                and self.refusal is None
                and self.audio is None
                and self.function_call is None
            ):
                raise ValueError(
                    "an assistant message needs content, tool_calls, function_call, refusal "
                    "or audio"
                )
        elif self.content is None:
            raise ValueError(f"a {self.role} message needs content")
        return self

    def _native_fits(self) -> Message:
        if self.format is None or self.native is None:
            raise ValueError("a native message needs both format and native")
        chat = [n for n in CHAT_FIELDS[:-2] if getattr(self, n) is not None]
        if chat:
            raise ValueError(f"a {self.format} message keeps its payload in native, not {chat}")
        seen = read_native(self.native, self.format)
        if seen.role != self.role:
            raise ValueError(f"role: its {self.format} payload makes it {seen.role!r}")
        return self

    @property
    def shape(self) -> Native | None:
        """What the store reads from a native payload (None for a chat message)."""
        return None if self.native is None else read_native(self.native, str(self.format))

    @property
    def call_ids(self) -> list[str]:
        """Ids of the tool calls this message makes (empty unless an assistant calls tools)."""
        if self.native is not None:
            return list(read_native(self.native, str(self.format)).calls)
        return [c.id for c in self.tool_calls] if self.tool_calls else []

    def text(self) -> str:
        """The message's text: the string content or its text parts joined (a native
        payload: the texts a model reads in it)."""
        if self.native is not None:
            return "\n".join(texts_of(self.native, str(self.format)))
        if isinstance(self.content, str):
            return self.content
        if not self.content:
            return ""
        return "\n".join(p.text for p in self.content if p.text is not None)

    def stored(self) -> dict[str, Any]:
        """The message as events and snapshots hold it: the fields it was given (a field
        not given reads back as its default; messages stored by earlier releases hold
        every field)."""
        if self.native is not None:
            return {
                "id": self.id, "role": self.role, "format": self.format,
                "native": self.native, "metadata": self.metadata,
            }  # fmt: skip
        # The fields as given (and the id): a message reads back key for key (as_given).
        held = self.model_dump(mode="json", exclude_unset=True)
        held.setdefault("id", self.id)
        return held

    def as_given(self) -> dict[str, Any]:
        """The message exactly as it came, key for key: a native payload as it is; a chat
        message's own fields (not the store's id and metadata), a provider's extras and
        explicit nulls included."""
        if self.native is not None:
            return dict(self.native)
        return self.model_dump(mode="json", exclude_unset=True, exclude={"id", "metadata"})

    def to_openai(self) -> dict[str, Any]:
        """The message as the chat-completions API takes it: no id, metadata, annotations or
        provider fields; an audio reply by its id. (A native payload converts to one chat
        message or none: read whole contexts with their to_openai(), which also merges a
        turn's calls and reports what it left out.)"""
        if self.native is not None:
            converted = convert([self], CHAT).payload
            return converted[0] if converted else {}
        sent = self.model_dump(mode="json", include=REQUEST_FIELDS, exclude_none=True)
        if "audio" in sent:
            sent["audio"] = {"id": sent["audio"]["id"]}
        return sent


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
    "ADDED_FIELDS",
    "CHAT_FIELDS",
    "REQUEST_FIELDS",
    "AnyToolCall",
    "AudioRef",
    "ContentPart",
    "CustomCall",
    "CustomToolCall",
    "FunctionCall",
    "JsonExtras",
    "Message",
    "Role",
    "ToolCall",
    "is_one_message",
    "parse_batch",
    "parse_json_object",
    "parse_message",
    "stored_batch",
    "stored_call_parts",  # (a chat message's: domain/shapes/chat.py)
]
