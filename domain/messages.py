"""Messages in the OpenAI chat shape, with a stable id and free-form metadata."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, Self

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
from ctxstore.domain.shapes import (
    CHAT,
    Native,
    read_native,
    texts_of,
)
from ctxstore.domain.shapes.chat import stored_call_parts

# NaN and infinities are not JSON: other languages' parsers reject what they would write.
_JSON: TypeAdapter[JsonValue] = TypeAdapter(JsonValue, config=ConfigDict(allow_inf_nan=False))
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
    "stored_call_parts",  # (a chat message's: domain/shapes/chat.py)
]
