"""GenAI messages (OpenTelemetry's semantic conventions, as JSON) rebuilt as the request body
a provider received: OpenAI Chat Completions or Responses, Anthropic Messages, else a neutral
body; the reply likewise (adapters/capture/otel.py feeds it)."""

from __future__ import annotations

import base64
import dataclasses
import json
import logging
from collections.abc import Mapping
from contextlib import suppress
from datetime import datetime
from enum import Enum
from typing import Any, ClassVar

from ctxstore.domain.captured import ANTHROPIC_API, CHAT_API, RESPONSES_API, CapturedCall
from ctxstore.domain.errors import CtxStoreError

log = logging.getLogger("ctxstore.capture")

SOURCE = "otel"
# The API a provider's bodies are read as, by its GenAI provider name (OpenAI's: chat, or
# Responses where the call says so).
_PROVIDER_APIS = {
    "openai": CHAT_API, "azure.ai.openai": CHAT_API, "az.ai.openai": CHAT_API,
    "anthropic": ANTHROPIC_API, "aws.bedrock.anthropic": ANTHROPIC_API,
}  # fmt: skip


def build_call(
    facts: Mapping[str, Any], inputs: list[Any], outputs: list[Any], system: list[Any],
    tools: list[Any], *, error: str | None, streamed: bool,
    timing: tuple[datetime, float] | None, call_id: str,
) -> CapturedCall | None:  # fmt: skip
    """A CapturedCall from GenAI messages (as JSON) and the call's attributes; None (with
    a log line) when nothing storable is left."""
    provider = str(facts.get("gen_ai.provider.name") or facts.get("gen_ai.system") or "")
    api = _PROVIDER_APIS.get(provider.lower())
    if api == CHAT_API and facts.get("openai.api.type") == "responses":
        api = RESPONSES_API
    shape = _SHAPES.get(api, _Neutral)(facts)
    inputs = [m for m in inputs if _is_message(m)]
    outputs = [m for m in outputs if _is_message(m)]
    request = shape.request(inputs, system, tools)
    response = None if error is not None else shape.response(outputs)
    if response is None and error is None:
        error = "the call ended without a reply (no error given)"
    started, latency = timing if timing is not None else (None, None)
    try:
        call = CapturedCall(
            request=request, response=response, error=error, api=api, source=SOURCE,
            model=_str(facts.get("gen_ai.response.model") or facts.get("gen_ai.request.model")),
            prompt_tokens=_count(facts.get("gen_ai.usage.input_tokens")),
            completion_tokens=_count(facts.get("gen_ai.usage.output_tokens")),
            started_at=started, latency=latency, streamed=streamed, call_id=call_id[:200],
        )  # fmt: skip
        call.check()
    except (CtxStoreError, ValueError) as exc:
        log.warning("capture (otel): a call was not recorded: %s: %s", type(exc).__name__,
                    str(exc)[:300])  # fmt: skip
        return None
    if shape.skipped:
        log.info("capture (otel): %d part(s) of unknown types left out (%s)",
                 len(shape.skipped), ", ".join(sorted(set(shape.skipped))[:5]))  # fmt: skip
    return call


def _is_message(value: Any) -> bool:
    if isinstance(value, dict) and isinstance(value.get("parts"), list):
        return True
    log.info("capture (otel): a message without parts left out")
    return False


class _Shape:
    """Builds one API's request and reply from GenAI messages."""

    api: str | None = None

    def __init__(self, facts: Mapping[str, Any]) -> None:
        self.facts = facts
        self.skipped: list[str] = []

    def request(self, inputs: list[Any], system: list[Any], tools: list[Any]) -> dict[str, Any]:
        raise NotImplementedError

    def response(self, outputs: list[Any]) -> dict[str, Any] | None:
        raise NotImplementedError

    def settings(self, names: Mapping[str, str]) -> dict[str, Any]:
        """The request's sampling settings the span names (`gen_ai.request.*`)."""
        found: dict[str, Any] = {}
        for attribute, key in names.items():
            value = self.facts.get(f"gen_ai.request.{attribute}")
            if value is not None:
                found[key] = list(value) if isinstance(value, tuple) else value
        return found

    def model(self, name: str) -> dict[str, Any]:
        value = self.facts.get(f"gen_ai.{name}.model")
        return {} if value is None else {"model": value}

    def usage(self, input_name: str, output_name: str) -> dict[str, Any]:
        got_in = _count(self.facts.get("gen_ai.usage.input_tokens"))
        got_out = _count(self.facts.get("gen_ai.usage.output_tokens"))
        if got_in is None and got_out is None:
            return {}
        return {"usage": {input_name: got_in or 0, output_name: got_out or 0}}

    def skip(self, part: Mapping[str, Any]) -> None:
        self.skipped.append(str(part.get("type")))


class _Chat(_Shape):
    api = CHAT_API
    SETTINGS: ClassVar[dict[str, str]] = {"temperature": "temperature", "top_p": "top_p", "seed": "seed",
                "max_tokens": "max_completion_tokens", "frequency_penalty": "frequency_penalty",
                "presence_penalty": "presence_penalty", "stop_sequences": "stop",
                "choice.count": "n"}  # fmt: skip

    def request(self, inputs: list[Any], system: list[Any], tools: list[Any]) -> dict[str, Any]:
        messages: list[dict[str, Any]] = []
        if _texts(system):
            messages.append({"role": "system", "content": _texts(system)})
        for m in inputs:
            messages.extend(self.message(m))
        body: dict[str, Any] = {**self.model("request"), "messages": messages}
        if tools:
            body["tools"] = [{"type": "function", "function": _function(t)} for t in tools]
        return {**body, **self.settings(self.SETTINGS)}

    def message(self, m: Mapping[str, Any]) -> list[dict[str, Any]]:
        role, parts = str(m.get("role") or "user"), m["parts"]
        answers = [p for p in parts if _kind(p) == "tool_call_response"]
        if role == "tool" or (answers and len(answers) == len(parts)):
            return [{"role": "tool", "tool_call_id": p.get("id"), "content": _as_text(_result(p))}
                    for p in answers]  # fmt: skip
        named = {"name": m["name"]} if m.get("name") else {}
        if role == "assistant":
            calls = [_openai_call(p) for p in parts if _kind(p) == "tool_call"]
            text = _texts(parts) or None
            for p in parts:
                if _kind(p) not in ("text", "tool_call"):
                    self.skip(p)
            return [{"role": role, **named, "content": text,
                     **({"tool_calls": calls} if calls else {})}]  # fmt: skip
        return [{"role": role, **named, "content": self.content(parts)}]

    def content(self, parts: list[Any]) -> Any:
        if parts and all(_kind(p) == "text" for p in parts) and len(parts) == 1:
            return str(parts[0].get("content", ""))
        blocks: list[dict[str, Any]] = []
        for p in parts:
            kind = _kind(p)
            if kind == "text":
                blocks.append({"type": "text", "text": str(p.get("content", ""))})
            elif kind in ("blob", "uri"):
                blocks.append({"type": "image_url", "image_url": {"url": _url(p)}})
            elif kind == "file":
                blocks.append({"type": "file", "file": {"file_id": p.get("file_id")}})
            else:
                self.skip(p)
        return blocks

    def response(self, outputs: list[Any]) -> dict[str, Any] | None:
        reasons = list(self.facts.get("gen_ai.response.finish_reasons") or ())
        choices = []
        for i, m in enumerate(outputs):
            message = self.message({**m, "role": "assistant"})[0]
            reason = m.get("finish_reason") or (reasons[i] if i < len(reasons) else "stop")
            choices.append(
                {
                    "index": i,
                    "message": message,
                    "finish_reason": "tool_calls" if reason == "tool_call" else reason,
                }
            )
        if not choices:
            return None
        response_id = self.facts.get("gen_ai.response.id")
        return {**({"id": response_id} if response_id else {}), "object": "chat.completion",
                **self.model("response"), "choices": choices,
                **self.usage("prompt_tokens", "completion_tokens")}  # fmt: skip


class _Responses(_Shape):
    api = RESPONSES_API
    SETTINGS: ClassVar[dict[str, str]] = {"temperature": "temperature", "top_p": "top_p",
                "max_tokens": "max_output_tokens"}  # fmt: skip

    def request(self, inputs: list[Any], system: list[Any], tools: list[Any]) -> dict[str, Any]:
        body: dict[str, Any] = {**self.model("request")}
        if _texts(system):
            body["instructions"] = _texts(system)
        body["input"] = [item for m in inputs for item in self.items(m, sent=True)]
        if tools:
            body["tools"] = [{"type": "function", **_function(t)} for t in tools]
        return {**body, **self.settings(self.SETTINGS)}

    def items(self, m: Mapping[str, Any], *, sent: bool) -> list[dict[str, Any]]:
        role, found = str(m.get("role") or "user"), []
        text_kind = "input_text" if sent and role != "assistant" else "output_text"
        content: list[dict[str, Any]] = []
        for p in m["parts"]:
            kind = _kind(p)
            if kind == "text":
                content.append({"type": text_kind, "text": str(p.get("content", ""))})
            elif kind in ("blob", "uri") and sent:
                content.append({"type": "input_image", "image_url": _url(p)})
            elif kind == "tool_call":
                found.append({"type": "function_call", "call_id": p.get("id"),
                              "name": p.get("name"), "arguments": _arguments(p)})  # fmt: skip
            elif kind == "tool_call_response":
                found.append({"type": "function_call_output", "call_id": p.get("id"),
                              "output": _as_text(_result(p))})  # fmt: skip
            elif kind in ("reasoning", "thinking"):
                found.append({"type": "reasoning", "summary": [
                    {"type": "summary_text", "text": str(p.get("content", ""))}]})  # fmt: skip
            else:
                self.skip(p)
        if content:
            if sent and role != "assistant" and len(content) == 1 and len(m["parts"]) == 1:
                message: dict[str, Any] = {"role": role, "content": content[0]["text"]}
            elif sent and role != "assistant":
                message = {"role": role, "content": content}
            else:
                message = {"type": "message", "role": "assistant", "content": content}
            found.insert(0, message)
        return found

    def response(self, outputs: list[Any]) -> dict[str, Any] | None:
        output = [item for m in outputs for item in self.items(m, sent=False)]
        if not outputs:
            return None
        response_id = self.facts.get("gen_ai.response.id")
        return {**({"id": response_id} if response_id else {}), "object": "response",
                **self.model("response"), "status": "completed", "output": output,
                **self.usage("input_tokens", "output_tokens")}  # fmt: skip


class _Anthropic(_Shape):
    api = ANTHROPIC_API
    SETTINGS: ClassVar[dict[str, str]] = {"max_tokens": "max_tokens", "temperature": "temperature", "top_p": "top_p",
                "top_k": "top_k", "stop_sequences": "stop_sequences"}  # fmt: skip
    STOPS: ClassVar[dict[str, str]] = {
        "tool_call": "tool_use",
        "stop": "end_turn",
        "length": "max_tokens",
    }

    def request(self, inputs: list[Any], system: list[Any], tools: list[Any]) -> dict[str, Any]:
        body: dict[str, Any] = {**self.model("request")}
        body.update(self.settings({"max_tokens": "max_tokens"}))
        if _texts(system):
            body["system"] = _texts(system)
        body["messages"] = [self.message(m) for m in inputs]
        if tools:
            body["tools"] = []
            for t in tools:
                f = _function(t)
                body["tools"].append({"name": f.get("name"),
                                      **({"description": f["description"]}
                                         if "description" in f else {}),
                                      "input_schema": f.get("parameters") or {"type": "object"}})  # fmt: skip
        return {**body, **self.settings(self.SETTINGS)}

    def message(self, m: Mapping[str, Any]) -> dict[str, Any]:
        role = "assistant" if m.get("role") == "assistant" else "user"
        parts = m["parts"]
        if len(parts) == 1 and _kind(parts[0]) == "text":
            return {"role": role, "content": str(parts[0].get("content", ""))}
        return {"role": role, "content": self.blocks(parts)}

    def blocks(self, parts: list[Any]) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        for p in parts:
            kind = _kind(p)
            if kind == "text":
                found.append({"type": "text", "text": str(p.get("content", ""))})
            elif kind == "tool_call":
                found.append({"type": "tool_use", "id": p.get("id"), "name": p.get("name"),
                              "input": _json_arguments(p)})  # fmt: skip
            elif kind == "tool_call_response":
                found.append({"type": "tool_result", "tool_use_id": p.get("id"),
                              "content": _as_text(_result(p))})  # fmt: skip
            elif kind in ("reasoning", "thinking"):
                found.append({"type": "thinking", "thinking": str(p.get("content", ""))})
            elif kind == "blob":
                found.append({"type": "image", "source": {
                    "type": "base64", "media_type": p.get("mime_type"),
                    "data": p.get("content")}})  # fmt: skip
            elif kind == "uri":
                found.append({"type": "image", "source": {"type": "url", "url": p.get("uri")}})
            else:
                self.skip(p)
        return found

    def response(self, outputs: list[Any]) -> dict[str, Any] | None:
        if not outputs:
            return None
        blocks = [b for m in outputs for b in self.blocks(m["parts"])]
        reasons = list(self.facts.get("gen_ai.response.finish_reasons") or ())
        reason = outputs[-1].get("finish_reason") or (reasons[0] if reasons else None)
        response_id = self.facts.get("gen_ai.response.id")
        return {**({"id": response_id} if response_id else {}), "type": "message",
                "role": "assistant", **self.model("response"), "content": blocks,
                "stop_reason": self.STOPS.get(reason, reason) if reason else None,
                **self.usage("input_tokens", "output_tokens")}  # fmt: skip


class _Neutral(_Shape):
    """No provider named: the GenAI messages as they are (api None)."""

    def request(self, inputs: list[Any], system: list[Any], tools: list[Any]) -> dict[str, Any]:
        body: dict[str, Any] = {**self.model("request"), "messages": inputs}
        if system:
            body["system"] = system
        if tools:
            body["tools"] = tools
        return {**body, **self.settings(_Chat.SETTINGS)}

    def response(self, outputs: list[Any]) -> dict[str, Any] | None:
        if not outputs:
            return None
        return {**self.model("response"), "messages": outputs}


_SHAPES: dict[str | None, type[_Shape]] = {
    CHAT_API: _Chat, RESPONSES_API: _Responses, ANTHROPIC_API: _Anthropic, None: _Neutral,
}  # fmt: skip


# ---- parts ---------------------------------------------------------------------------


def plain(value: Any, depth: int = 0) -> Any:
    """The util's message types (dataclasses, enums, bytes) as JSON values."""
    if depth > 64:
        return None
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, Enum):
        return plain(value.value, depth + 1)
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode("ascii")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name), depth + 1)
                for f in dataclasses.fields(value)
                if getattr(value, f.name) is not None}  # fmt: skip
    if isinstance(value, Mapping):
        return {str(k): plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [plain(v, depth + 1) for v in value]
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        with suppress(Exception):  # an object we cannot read is kept as its text
            return plain(dump(mode="json"), depth + 1)
    return str(value)


def _kind(part: Any) -> str | None:
    return part.get("type") if isinstance(part, dict) else None


def _texts(parts: list[Any]) -> str:
    return "\n".join(str(p.get("content", "")) for p in parts if _kind(p) == "text")


def _result(part: Mapping[str, Any]) -> Any:
    return part.get("response", part.get("result"))


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _arguments(part: Mapping[str, Any]) -> str:
    """A tool call's arguments as the JSON text OpenAI sends (an unparsed text as it was)."""
    value = part.get("arguments")
    return "{}" if value is None else _as_text(value)


def _json_arguments(part: Mapping[str, Any]) -> Any:
    value = part.get("arguments")
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return {} if value is None else value


def _openai_call(part: Mapping[str, Any]) -> dict[str, Any]:
    return {"id": part.get("id"), "type": "function",
            "function": {"name": part.get("name"), "arguments": _arguments(part)}}  # fmt: skip


def _function(tool: Any) -> dict[str, Any]:
    """A tool definition as {name, description, parameters} (flat or under `function`)."""
    if not isinstance(tool, dict):
        return {"name": str(tool)}
    nested = tool.get("function")
    inner: dict[str, Any] = nested if isinstance(nested, dict) else tool
    found = {"name": inner.get("name")}
    if inner.get("description") is not None:
        found["description"] = inner["description"]
    parameters = inner.get("parameters", inner.get("input_schema"))
    if parameters is not None:
        found["parameters"] = parameters
    return found


def _url(part: Mapping[str, Any]) -> str:
    if _kind(part) == "uri":
        return str(part.get("uri", ""))
    return (
        f"data:{part.get('mime_type') or 'application/octet-stream'};base64,{part.get('content')}"
    )


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
