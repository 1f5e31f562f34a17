"""Texts, files, documents and images from one shape's parts to another's (conversions.py).

A result's text is its string, or its text parts joined; content of text parts only is sent
as one string. A file travels as what both shapes can hold: inline data (a `data:` URL in chat and
Responses, a base64 `source` in Anthropic), a URL where the target takes one (Responses'
`file_url`, Anthropic's `url` source), or plain text (an Anthropic text document). A
provider's file id names a file in that provider's store only: it is not carried to
another provider's shape (and reported, as is anything else a part cannot carry).
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

JSON = dict[str, Any]
ANTHROPIC_DOCUMENTS = ("application/pdf",)  # base64 documents the Messages API takes


def result_text(value: Any) -> str:
    """A result's text: a string, or the text of its parts."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(
            str(p.get("text", "")) for p in value if isinstance(p, dict) and "text" in p
        )
    return json.dumps(value, ensure_ascii=False)


def flatten(parts: list[JSON]) -> Any:
    """A content of text parts only is sent as one string (as every chat API takes it)."""
    if all(p["type"] == "text" for p in parts):
        return "".join(p["text"] for p in parts) if len(parts) == 1 else parts
    return parts


def chat_turn(role: str, content: Any, calls: list[JSON], results: list[JSON]) -> list[JSON]:
    """A turn read as chat messages: its results as tool messages first, then one message
    of its content and calls (none when it has neither: `content` None)."""
    out = list(results)
    if content is not None or calls:
        one: JSON = {"role": role, "content": content}
        if calls:
            one["tool_calls"] = calls
        out.append(one)
    return out


def data_url(media_type: str, data: str) -> str:
    return f"data:{media_type};base64,{data}"


def split_data_url(text: str) -> tuple[str, str] | None:
    if text.startswith("data:") and ";base64," in text:
        media, data = text[5:].split(";base64,", 1)
        return media, data
    return None


def _inline(file_data: str, filename: str | None) -> tuple[str, str]:
    """(media type, base64) of a chat or Responses `file_data`: a data URL, or bare base64
    (the media type then read from the file name: PDF when it cannot be)."""
    found = split_data_url(file_data)
    if found is not None:
        return found
    guessed = "text/plain" if (filename or "").lower().endswith(".txt") else "application/pdf"
    return guessed, file_data


# ---- chat `file` parts ------------------------------------------------------------------


def chat_file_to_responses(part: JSON) -> JSON | None:
    file = part.get("file") or {}
    if file.get("file_data"):
        media, data = _inline(file["file_data"], file.get("filename"))
        found: JSON = {"type": "input_file", "file_data": data_url(media, data)}
    elif file.get("file_id"):
        found = {"type": "input_file", "file_id": file["file_id"]}  # the same provider's
    else:
        return None
    if file.get("filename"):
        found["filename"] = file["filename"]
    return found


def chat_file_to_anthropic(part: JSON) -> JSON | None:
    file = part.get("file") or {}
    if not file.get("file_data"):
        return None  # an OpenAI file id names nothing at Anthropic
    media, data = _inline(file["file_data"], file.get("filename"))
    return anthropic_document(media, data, file.get("filename"))


def anthropic_document(media: str, data: str, title: str | None) -> JSON | None:
    """A document block of inline data: a PDF as base64, plain text as text."""
    if media in ANTHROPIC_DOCUMENTS:
        source: JSON = {"type": "base64", "media_type": media, "data": data}
    elif media == "text/plain":
        try:
            text = base64.b64decode(data, validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            return None
        source = {"type": "text", "media_type": "text/plain", "data": text}
    else:
        return None
    block: JSON = {"type": "document", "source": source}
    if title:
        block["title"] = title
    return block


# ---- Responses `input_file` parts ---------------------------------------------------------


def responses_file_to_chat(part: JSON) -> JSON | None:
    file: JSON = {}
    if part.get("file_data"):
        media, data = _inline(part["file_data"], part.get("filename"))
        file["file_data"] = data_url(media, data)
    elif part.get("file_id"):
        file["file_id"] = part["file_id"]  # the same provider's
    else:
        return None  # a file_url: chat takes none
    if part.get("filename"):
        file["filename"] = part["filename"]
    return {"type": "file", "file": file}


# ---- Anthropic `document` blocks ------------------------------------------------------------


def document_to_chat(block: JSON) -> JSON | None:
    source = block.get("source") or {}
    kind = source.get("type")
    if kind == "base64":
        file: JSON = {"file_data": data_url(source.get("media_type", ""), source.get("data", ""))}
        if block.get("title"):
            file["filename"] = block["title"]
        return {"type": "file", "file": file}
    if kind == "text":
        return {"type": "text", "text": str(source.get("data", ""))}
    return None  # a URL or a file id: chat takes neither


def document_to_responses(block: JSON) -> JSON | None:
    source = block.get("source") or {}
    kind = source.get("type")
    found: JSON
    if kind == "base64":
        media, data = source.get("media_type", ""), source.get("data", "")
        found = {"type": "input_file", "file_data": data_url(media, data)}
    elif kind == "url":
        found = {"type": "input_file", "file_url": source.get("url", "")}
    elif kind == "text":
        return {"type": "input_text", "text": str(source.get("data", ""))}
    else:
        return None
    if block.get("title"):
        found["filename"] = block["title"]
    return found


def image_to_responses(block: JSON) -> JSON | None:
    """An Anthropic image block as a Responses input_image (inline data or a URL)."""
    source = block.get("source") or {}
    if source.get("type") == "base64":
        url = data_url(source.get("media_type", "image/png"), source.get("data", ""))
    elif source.get("type") == "url":
        url = str(source.get("url"))
    else:
        return None
    return {"type": "input_image", "image_url": url, "detail": "auto"}
