"""One model call recorded as the SDKs make it: the response's output inserted in its own
shape and the provider's usage recorded, in one command (both events in one write)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from ctxstore.adapters.store.debug import sent_items
from ctxstore.adapters.store.results import Written
from ctxstore.adapters.store.writer import Writer
from ctxstore.domain.context import JSON, Context
from ctxstore.domain.errors import InvalidMessageError
from ctxstore.domain.gemini import GEMINI, field
from ctxstore.domain.limits import check_message_sizes
from ctxstore.domain.plain import as_plain
from ctxstore.domain.shapes import ANTHROPIC, CHAT, RESPONSES
from ctxstore.domain.tokens import REPLY_PRIMING


def read_response(response: Any) -> tuple[str, list[JSON], str, int, int]:
    """(shape, output messages, model, prompt tokens, completion tokens) of an OpenAI
    ChatCompletion, a Responses Response, an Anthropic Message or a Gemini
    GenerateContentResponse (object or dict)."""
    data = as_plain(response)
    if not isinstance(data, dict):
        raise InvalidMessageError(
            f"a response must be an SDK's response object or a dict, got {type(data).__name__}"
        )
    usage = data.get("usage") or {}
    model = str(data.get("model") or "unknown")
    if data.get("object") == "chat.completion" or "choices" in data:
        choices = data.get("choices") or []
        if not choices:
            raise InvalidMessageError("the chat completion has no choices")
        message = choices[0]["message"]
        return (
            CHAT,
            [message],
            model,
            int(usage.get("prompt_tokens", 0)),
            int(usage.get("completion_tokens", 0)),
        )
    if data.get("object") == "response" or isinstance(data.get("output"), list):
        return (
            RESPONSES,
            list(data.get("output") or []),
            model,
            int(usage.get("input_tokens", 0)),
            int(usage.get("output_tokens", 0)),
        )
    if data.get("type") == "message" and data.get("role") == "assistant":
        prompt = sum(
            int(usage.get(k) or 0)
            for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        )
        message = {"role": "assistant", "content": data.get("content") or []}
        return ANTHROPIC, [message], model, prompt, int(usage.get("output_tokens", 0))
    if isinstance(data.get("candidates"), list):
        return _gemini(data)
    raise InvalidMessageError(
        "not a ChatCompletion, a Responses Response, an Anthropic Message or a Gemini "
        f"GenerateContentResponse: keys {sorted(data)[:8]}"
    )


def _gemini(data: JSON) -> tuple[str, list[JSON], str, int, int]:
    """The first candidate's content and the usage of a GenerateContentResponse (the SDK's
    field names or the REST API's camelCase). Completion tokens count its thoughts too."""
    candidates = data["candidates"]
    content = field(candidates[0], "content") if candidates else None
    if not isinstance(content, dict) or not content.get("parts"):
        reason = field(candidates[0], "finish_reason") if candidates else "no candidates"
        raise InvalidMessageError(f"the Gemini response has no content to store ({reason})")
    usage = field(data, "usage_metadata") or {}
    model = str(field(data, "model_version") or data.get("model") or "unknown")
    completion = sum(
        int(field(usage, k) or 0) for k in ("candidates_token_count", "thoughts_token_count")
    )
    return GEMINI, [content], model, int(field(usage, "prompt_token_count") or 0), completion


def record_response(
    writer: Writer, cid: UUID, response: Any, *, request: Any = None, actor: str,
    max_message_bytes: int, latency: float | None = None,
) -> Written:  # fmt: skip
    """Insert the response's output and record its usage (see ContextStore.record_response)."""
    shape, output, model, prompt_tokens, completion_tokens = read_response(response)
    check_message_sizes(output, max_message_bytes)
    sent = _request_messages(request)
    core = writer.core

    def command(c: Context) -> list[str]:
        at_version, counted, estimated = c.version, c.tokens + REPLY_PRIMING, c.estimated > 0
        items = None if sent is None else sent_items(c, None, sent)
        ids = c.insert(output, actor=actor, counter=core.counter(c), format=shape) if output else []
        c.record_usage(
            for_version=at_version, model=model, prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens, counted_tokens=counted, estimated=estimated,
            sent=items, actor=actor, latency=latency,
        )  # fmt: skip
        return ids

    return writer.command(cid, None, command)


def _request_messages(request: Any) -> list[Any] | None:
    """The messages the request sent (its `messages`, or `input`, with `system`), or None."""
    if request is None:
        return None
    data = as_plain(request)
    if isinstance(data, dict):
        found: Any = data.get("messages", data.get("input", data.get("contents")))
        system = data.get("system", _system_instruction(data))
        if isinstance(found, str):
            found = [{"role": "user", "content": found}]
        if system is not None:
            found = [{"role": "system", "content": system}, *(found or [])]
    else:
        found = data
    if not isinstance(found, Sequence) or isinstance(found, str):
        raise InvalidMessageError("request: give the request's messages (or input) as a list")
    return [as_plain(m) for m in found]


def _system_instruction(request: JSON) -> str | None:
    """A Gemini request's system instruction (top level, or in its config) as text."""
    config = request.get("config") if isinstance(request.get("config"), dict) else {}
    found = field(request, "system_instruction") or field(config or {}, "system_instruction")
    if found is None or isinstance(found, str):
        return found
    parts = found.get("parts") if isinstance(found, dict) else found
    texts = [str(p.get("text", "")) for p in parts or [] if isinstance(p, dict)]
    return "\n".join(texts)
