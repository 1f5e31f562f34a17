"""A model call as the provider received it, captured by an SDK integration or an
OpenTelemetry hook: the request body exactly as sent, the reply (a stream assembled whole),
its usage, timing and outcome. Recorded as a usage event holding the call (`Context.
UsageRecorded.call`); recording one writes no message into the context — the SDK's own
session or saver writes those."""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ctxstore.domain.errors import InvalidOperationError, LimitExceededError
from ctxstore.domain.json_values import json_problem, json_size_bound
from ctxstore.domain.limits import MAX_ACTOR

MAX_CALL_BYTES = 16 * 1024 * 1024  # a request and its reply together, as JSON
MAX_ERROR = 2000  # characters of a failed call's error kept

# The provider APIs a call's body is read as (what its messages and reply are).
CHAT_API = "openai.chat"
RESPONSES_API = "openai.responses"
ANTHROPIC_API = "anthropic.messages"
GEMINI_API = "gemini.generate_content"
APIS = (CHAT_API, RESPONSES_API, ANTHROPIC_API, GEMINI_API)


class CapturedCall(BaseModel):
    """One model call as its provider saw it. `request` is the body as sent (JSON object),
    `response` the reply as received (a stream assembled into the reply it amounts to), or
    None with `error` for a failed call. `for_version`: the context version the call's input
    came from, where the SDK's input came from the store (else the head when recorded).
    `call_id` makes a retried recording of the same call a no-op."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    request: dict[str, Any]
    response: dict[str, Any] | None = None
    error: str | None = None
    api: str | None = None  # one of APIS; None: read from the bodies' shape
    source: str = "manual"  # what captured it: agents, langchain, adk, otel, ...
    model: str | None = None  # else the reply's, else the request's
    prompt_tokens: int | None = Field(default=None, ge=0)  # else the reply's usage
    completion_tokens: int | None = Field(default=None, ge=0)
    started_at: datetime | None = None
    latency: float | None = Field(default=None, ge=0)  # seconds
    streamed: bool = False
    for_version: int | None = Field(default=None, ge=1)
    # Recorded with an insert (`insert(..., calls=)`): the position, among the messages
    # inserted, of this call's reply; what was sent is what the context showed before it.
    reply_at: int | None = Field(default=None, ge=0)
    call_id: str = Field(default_factory=lambda: uuid.uuid4().hex, min_length=1, max_length=200)
    # Read back from what the SDK kept (a transcript) or built from its request object, not
    # seen on its way to the provider: what the record holds may fall short of what was sent.
    reconstructed: bool = False

    @field_validator("source")
    @classmethod
    def _short(cls, value: str) -> str:
        if not value or len(value) > MAX_ACTOR:
            raise ValueError(f"a source is 1..{MAX_ACTOR} characters")
        return value

    @field_validator("api")
    @classmethod
    def _known_api(cls, value: str | None) -> str | None:
        if value is not None and value not in APIS:
            raise ValueError(f"api is one of {', '.join(APIS)}, got {value!r:.80}")
        return value

    @field_validator("error")
    @classmethod
    def _clipped(cls, value: str | None) -> str | None:
        return None if value is None else value[:MAX_ERROR]

    def check(self) -> None:
        """Refuse bodies that are not storable JSON or are too large, naming which."""
        for name, body in (("request", self.request), ("response", self.response)):
            problem = json_problem(body)
            if problem is not None:
                raise InvalidOperationError(f"the call's {name} is not storable JSON: {problem}")
        bound = json_size_bound([self.request, self.response])
        if bound is None or bound > MAX_CALL_BYTES:
            size = len(json.dumps([self.request, self.response], ensure_ascii=False).encode())
            if size > MAX_CALL_BYTES:
                raise LimitExceededError(
                    f"the call's request and reply are {size} bytes; at most {MAX_CALL_BYTES}"
                )
        if self.response is None and self.error is None:
            raise InvalidOperationError("a captured call has a response or an error")

    def api_of(self) -> str | None:
        """The provider API its bodies are shaped for, named or read from the request."""
        if self.api is not None:
            return self.api
        r = self.request
        if "contents" in r:
            return GEMINI_API
        if "input" in r or "instructions" in r:
            return RESPONSES_API
        if "messages" in r:  # (the integrations name it: a bare body is read as best it can)
            if "system" not in r:
                return CHAT_API
            return ANTHROPIC_API if "max_tokens" in r else None  # (Anthropic requires it)
        return None

    def record(self) -> dict[str, Any]:
        """What the usage event keeps of it (the figures live in the event's own fields)."""
        return {
            "call_id": self.call_id, "source": self.source, "api": self.api_of(),
            "request": self.request, "response": self.response, "error": self.error,
            "streamed": self.streamed,
            "started_at": None if self.started_at is None else self.started_at.isoformat(),
            **({"reconstructed": True} if self.reconstructed else {}),
        }  # fmt: skip


def request_messages(api: str | None, request: dict[str, Any]) -> list[Any]:
    """The messages a request body sent, in its API's own shape (the system prompt or
    instructions first, as a system message): what `call.messages` shows."""
    found: list[Any] = []
    if api == RESPONSES_API:
        if isinstance(request.get("instructions"), str) and request["instructions"]:
            found.append({"role": "system", "content": request["instructions"]})
        given = request.get("input")
        if isinstance(given, str):
            return [*found, {"role": "user", "content": given}]
        return [*found, *(given if isinstance(given, list) else [])]
    if api == GEMINI_API:
        system = request.get("system_instruction", request.get("systemInstruction"))
        config = request.get("config")
        if system is None and isinstance(config, dict):
            system = config.get("system_instruction")
        text = _text_of(system)
        if text:
            found.append({"role": "system", "content": text})
        contents = request.get("contents")
        return [*found, *(contents if isinstance(contents, list) else [])]
    system = request.get("system")
    text = _text_of(system)
    if text:
        found.append({"role": "system", "content": text})
    messages = request.get("messages")
    return [*found, *(messages if isinstance(messages, list) else [])]


def _text_of(value: Any) -> str | None:
    """A system prompt as text: a string, or the text of its blocks or parts."""
    if value is None or isinstance(value, str):
        return value
    parts = value.get("parts") if isinstance(value, dict) else value
    if not isinstance(parts, list):
        return None
    texts = [str(p.get("text", "")) for p in parts if isinstance(p, dict) and "text" in p]
    texts += [p for p in parts if isinstance(p, str)]
    return "\n".join(texts) or None
