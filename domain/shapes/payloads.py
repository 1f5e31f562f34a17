"""What the store reads alike from Responses items and Anthropic messages: a call's id, the
texts a model reads, what images and files cost."""

from __future__ import annotations

import json
from typing import Any

from ctxstore.domain.errors import InvalidMessageError
from ctxstore.domain.images import (
    UNKNOWN_SIZE,
    anthropic_image_tokens,
    price_openai_url,
    size_of_base64,
)


def check_id(value: Any, what: str) -> None:
    if not isinstance(value, str) or not value:
        raise InvalidMessageError(f"{what} must be a non-empty string, got {value!r:.60}")


_TEXT_KEYS = {
    "text", "thinking", "arguments", "input", "output", "name", "refusal", "query", "code",
    "result", "content", "summary", "queries",
}  # fmt: skip
_SKIPPED_KEYS = {"id", "call_id", "tool_use_id", "type", "status", "signature", "data",
                 "encrypted_content", "role", "cache_control", "source", "image_url",
                 "file_data", "file_id", "approval_request_id"}  # fmt: skip


def payload_texts(payload: dict[str, Any]) -> list[str]:
    """The texts of a Responses item or an Anthropic message a model reads."""
    found: list[str] = []
    _collect(payload, found)
    return found


def _collect(value: Any, found: list[str], key: str | None = None) -> None:
    if isinstance(value, str):
        if key is None or key in _TEXT_KEYS:
            found.append(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            if k in _SKIPPED_KEYS:
                continue
            if k == "input" and isinstance(v, dict):  # a tool_use block's input: its JSON
                found.append(json.dumps(v, ensure_ascii=False))
                continue
            _collect(v, found, k if isinstance(v, str) else key)
    elif isinstance(value, list):
        for v in value:
            _collect(v, found, key)


def content_cost(payload: dict[str, Any]) -> tuple[int, bool]:
    """A payload's images: Responses `input_image` by OpenAI's formula, Anthropic `image`
    blocks by Anthropic's (both from inline bytes, else estimated); documents and files
    make the count an estimate."""
    content = payload.get("content")
    if not isinstance(content, list):
        return 0, False
    total, estimated = 0, False
    for part in content:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "input_image":
            url = part.get("image_url")
            priced = price_openai_url(
                url if isinstance(url, str) else "", str(part.get("detail", "auto"))
            )
            total += priced.tokens
            estimated = estimated or priced.estimated
        elif kind == "image":
            source: dict[str, Any] = part["source"] if isinstance(part.get("source"), dict) else {}
            data = str(source.get("data", ""))
            size = size_of_base64(data) if source.get("type") == "base64" else None
            total += anthropic_image_tokens(*(size or UNKNOWN_SIZE))
            estimated = estimated or size is None
        elif kind in ("input_file", "document", "input_audio"):
            estimated = True
    return total, estimated
