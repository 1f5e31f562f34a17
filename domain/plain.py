"""What a message is before it is parsed: an SDK's object read as its plain JSON, and the
mark of a record (kept in a context's history, never sent to a model). The modules below
messages.py (streaming, its repair and the conversions) need these without the model."""

from __future__ import annotations

from typing import Any

from ctxstore.domain.errors import InvalidMessageError

RECORD_MARK = {"ctxstore": "record"}  # a message's metadata marking a record (below)
MAX_DEPTH = 100  # levels as_plain_tree converts (json_values refuses far less deep nesting)
LEAVES = frozenset((str, int, float, bool, type(None)))  # plain JSON values: nothing to read


def as_plain(value: Any) -> Any:
    """An SDK's pydantic message object (the OpenAI SDK's ChatCompletionMessage, ...) as the
    JSON it was made from; anything else (a dict, ctxstore's own Message) unchanged."""
    if (
        isinstance(value, dict)
        or getattr(type(value), "ctxstore_message", False)
        or not callable(getattr(value, "model_dump", None))
    ):
        return value
    # Google's SDK aliases its fields in camelCase (the REST API's); its own dicts, and
    # ctxstore's Gemini messages, use the field names (snake_case). Other SDKs' aliases
    # are their wire names.
    by_alias = not type(value).__module__.startswith("google.genai")
    try:
        return value.model_dump(mode="json", exclude_unset=True, by_alias=by_alias)
    except (TypeError, ValueError) as exc:
        name = f"{type(value).__module__}.{type(value).__qualname__}"
        raise InvalidMessageError(f"cannot read a message from a {name}: {exc}") from None


def as_plain_tree(value: Any, depth: int = 0) -> Any:
    """`value` with an SDK's objects read as their plain JSON at any depth (the Anthropic
    SDK's content blocks in a dict's list, the OpenAI SDK's tool calls in a dict): as the
    SDKs themselves accept them. Past MAX_DEPTH levels it stops converting (the checks
    of plain JSON refuse what is nested that deep)."""
    if depth > MAX_DEPTH:
        return value
    kind = type(value)
    if kind is not dict and kind is not list:  # (the common case: plain JSON, walked below)
        if kind in LEAVES:
            return value
        value = as_plain(value)
    deeper = depth + 1
    if isinstance(value, dict):
        return {k: v if type(v) in LEAVES else as_plain_tree(v, deeper) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [v if type(v) in LEAVES else as_plain_tree(v, deeper) for v in value]
    return value


def is_record(message: Any) -> bool:
    """Whether a message (a Message or its JSON) is a record: kept in the context's history
    and read back with it, never sent to a model (an SDK's transcript line that is not a
    message: a title, a file snapshot, a boundary). It costs no tokens."""
    metadata = message.get("metadata") if isinstance(message, dict) else message.metadata
    return isinstance(metadata, dict) and metadata.get("ctxstore") == "record"
