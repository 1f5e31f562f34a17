"""Attachments sent as a provider's file id instead of their bytes.

After uploading an attachment to a provider's Files API once, a caller records the id it got
(`record_file_id`); a reader asking for that provider's files then gets each part whose
attachment has one in the form the provider takes a file in — the rest stay references (or
their data, read inline):

| Part (as written) | Becomes, with the provider's file id |
|---|---|
| Anthropic `source: {"type": "base64", ...}` | `source: {"type": "file", "file_id": ...}` |
| Responses `input_image` with `image_url` | `input_image` with `file_id` (its `detail` kept) |
| Responses `input_file` with `file_data` | `input_file` with `file_id` |
| Chat `file` part with `file.file_data` | `file` part with `file.file_id` |

A chat `image_url` part has no file form in Chat Completions: it keeps its data.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ctxstore.domain.blobs import is_ref, parse_ref

FileId = Callable[[str], str | None]  # an attachment's sha256 -> the provider's file id


def _id_of(value: Any, file_id: FileId) -> str | None:
    return file_id(parse_ref(value).sha256) if is_ref(value) else None


def _anthropic_part(node: dict[str, Any], file_id: FileId) -> dict[str, Any] | None:
    """An Anthropic source's file form, or None when it has none."""
    if node.get("type") == "base64" and (found := _id_of(node.get("data"), file_id)):
        return {"type": "file", "file_id": found}
    return None


def _openai_part(node: dict[str, Any], file_id: FileId) -> dict[str, Any] | None:
    """A Responses or chat part's file form, or None when it has none."""
    kind = node.get("type")
    if kind == "input_image" and (found := _id_of(node.get("image_url"), file_id)):
        return {**{k: v for k, v in node.items() if k != "image_url"}, "file_id": found}
    if kind == "input_file" and (found := _id_of(node.get("file_data"), file_id)):
        return {**{k: v for k, v in node.items() if k not in ("file_data", "filename")},
                "file_id": found}  # fmt: skip
    file = node.get("file")
    if (
        kind == "file"
        and isinstance(file, dict)
        and (found := _id_of(file.get("file_data"), file_id))
    ):
        return {**node, "file": {"file_id": found}}
    return None


# Each provider's file forms: OpenAI's for Responses and chat parts, Anthropic's for sources.
_PARTS = {"openai": _openai_part, "anthropic": _anthropic_part}
PROVIDERS = tuple(_PARTS)


def with_file_ids(node: Any, provider: str, file_id: FileId) -> Any:
    """A copy of a message's JSON whose attachments with a file id at `provider` are given
    as that file id, in the form the provider takes."""
    if isinstance(node, dict):
        swapped = _PARTS.get(provider, _openai_part)(node, file_id)
        if swapped is not None:
            return swapped
        return {k: with_file_ids(v, provider, file_id) for k, v in node.items()}
    if isinstance(node, list):
        return [with_file_ids(v, provider, file_id) for v in node]
    return node
