"""Limits and name rules every surface applies alike: actors, tenants, names, integers."""

from __future__ import annotations

import json
import math
from typing import Any, TypeGuard
from uuid import UUID, uuid5

from ctxstore.domain.errors import InvalidOperationError, LimitExceededError
from ctxstore.domain.json_values import json_problem, json_size_bound
from ctxstore.domain.messages import Message
from ctxstore.domain.plain import as_plain

MAX_ACTOR = 200  # characters of an actor, tenant or model name
MAX_NAME = 500  # characters of a context's name
MAX_INT = 2**63 - 1  # the largest integer a database column (bigint) holds
MAX_KEY = 500  # characters of a caller's own key for a context (a session id)
MAX_PAGE = 10_000  # contexts one listing returns at most (page on with `after`)
KEY_NAMESPACE = UUID("6d1f3c52-8a0e-4c59-9d2b-7f4e0b1a2c3d")  # ids of keyed contexts
CHOSEN_NAMESPACE = UUID("b3f0e7a4-2c1d-4e8f-9a6b-5d4c3b2a1f0e")  # tenants' chosen ids


def text_problem(value: Any, most: int, *, blank_ok: bool = False) -> bool:
    """Whether `value` is not a storable string of at most `most` characters: a text
    column holds no NUL (PostgreSQL refuses it) and no lone surrogate (not Unicode)."""
    return (
        not isinstance(value, str)
        or len(value) > most
        or (not blank_ok and not value.strip())
        or "\x00" in value
        or json_problem(value) is not None
    )


def column_text(value: str) -> str:
    """A text as a database column can hold it: NUL and lone surrogates (which stores
    written before they were refused may hold) replaced by U+FFFD."""
    if value.isascii() and "\x00" not in value:
        return value
    return value.replace("\x00", "\ufffd").encode("utf-8", "replace").decode("utf-8")


def check_text(value: Any, name: str, most: int = MAX_ACTOR, *, optional: bool = True) -> Any:
    """A text a caller gives for a text column or a filter on one; raises
    InvalidOperationError naming the field (a NUL, a lone surrogate, too long, blank)."""
    if value is None and optional:
        return None
    if text_problem(value, most):
        raise InvalidOperationError(
            f"{name} must be a non-empty string of at most {most} characters without NUL "
            f"or lone surrogates, got {value!r:.80}"
        )
    return value


def check_actor(actor: Any) -> str:
    """The actor a command records; raises InvalidOperationError naming a bad one."""
    if text_problem(actor, MAX_ACTOR):
        raise InvalidOperationError(
            f"actor must be a non-empty string of at most {MAX_ACTOR} chars, got {actor!r:.80}"
        )
    return str(actor)


def check_tenant(tenant: Any) -> str | None:
    if tenant is not None and (text_problem(tenant, MAX_ACTOR, blank_ok=True) or not tenant):
        raise InvalidOperationError(f"tenant must be a non-empty string, got {tenant!r:.80}")
    return None if tenant is None else str(tenant)


def check_name(name: Any) -> str | None:
    if name is not None and text_problem(name, MAX_NAME, blank_ok=True):
        raise InvalidOperationError(
            f"context name must be a string of at most {MAX_NAME} chars, got {name!r:.80}"
        )
    return None if name is None else str(name)


def strict_int(value: Any) -> TypeGuard[int]:
    """An int that is not a bool and fits a database's bigint column."""
    return (
        isinstance(value, int) and not isinstance(value, bool) and -MAX_INT - 1 <= value <= MAX_INT
    )


def check_int(value: Any, name: str, *, low: int | None = None, high: int = MAX_INT) -> int:
    """A strict integer (never a bool) within [low, high]; raises InvalidOperationError."""
    if not strict_int(value):
        raise InvalidOperationError(f"{name} must be an integer, got {value!r:.80}")
    if (low is not None and value < low) or value > high:
        bounds = f"at least {low}" if low is not None else ""
        bounds += (" and " if bounds else "") + f"at most {high}"
        raise InvalidOperationError(f"{name} must be {bounds}, got {value!r}")
    return value


def check_count(visible: int, adding: int, limit: int, cid: UUID) -> None:
    """Refuse a command that would leave more than `limit` visible messages."""
    if visible + adding > limit:
        raise LimitExceededError(
            f"context {cid} would hold {visible + adding} visible messages; the "
            f"limit is {limit} (CTXSTORE_MAX_MESSAGES); compact or delete first"
        )


def check_message_sizes(messages: Any, limit: int) -> None:
    """Refuse a message whose JSON (UTF-8) is over `limit` bytes, before any other work."""
    for i, value in enumerate(messages):
        m = as_plain(value)
        if isinstance(m, str):
            size = len(m.encode("utf-8", "surrogatepass"))
        elif isinstance(m, Message):
            size = len(m.model_dump_json(exclude_none=True).encode())
        elif (bound := json_size_bound(m)) is not None and bound <= limit:
            continue  # surely small enough: not worth encoding to measure
        else:
            try:
                text = json.dumps(m, ensure_ascii=False, default=str)
            except (TypeError, ValueError, RecursionError):
                continue  # not storable JSON: validation names it
            size = len(text.encode("utf-8", "surrogatepass"))
        if size > limit:
            raise LimitExceededError(
                f"message {i} is {size} bytes; the limit is {limit} (CTXSTORE_MAX_MESSAGE_BYTES)"
            )


def chosen_id(context_id: Any) -> UUID:
    """The id a caller chose for a new context; raises InvalidOperationError."""
    if isinstance(context_id, UUID):
        return context_id
    try:
        return UUID(str(context_id))
    except ValueError:
        raise InvalidOperationError(f"context_id is not a UUID: {context_id!r:.80}") from None


def key_context_id(key: Any, tenant: str | None) -> UUID:
    """The id of the context a caller's own key names: derived from (tenant, key), so every
    process finds the same one and two tenants' equal keys never meet."""
    if not isinstance(key, str) or not 0 < len(key) <= MAX_KEY or json_problem(key) is not None:
        raise InvalidOperationError(
            f"key must be a string of 1-{MAX_KEY} chars of valid Unicode, got {key!r:.80}"
        )
    return uuid5(KEY_NAMESPACE, f"{tenant or ''}\x00{key}")


def check_usage(model: Any, counts: dict[str, Any], for_version: Any, head: int, sent: Any) -> None:
    """Refuse a usage record naming no model, a negative or non-integer count, a version the
    context does not have, or `sent` items other than {"id": ...} / {"message": {...}}."""
    if text_problem(model, MAX_ACTOR):
        raise InvalidOperationError(f"model must be a non-empty name, got {model!r:.80}")
    for name, value in counts.items():
        if not strict_int(value) or value < 0:
            raise InvalidOperationError(f"{name} must be a count >= 0, got {value!r}")
    if not strict_int(for_version):
        raise InvalidOperationError(f"version must be an integer, got {for_version!r}")
    if not 1 <= for_version <= head:
        raise InvalidOperationError(
            f"version {for_version} is not one of this context's (1..{head})"
        )
    if sent is not None and (
        not isinstance(sent, list)
        or not all(
            isinstance(s, dict)
            and (
                (s.keys() == {"id"} and isinstance(s["id"], str))
                or (s.keys() == {"message"} and isinstance(s["message"], dict))
            )
            for s in sent
        )
    ):
        raise InvalidOperationError(
            'sent must list {"id": ...} or {"message": {...}} items, one per message sent'
        )


MAX_LATENCY = 7 * 24 * 3600.0  # seconds: a week is no model call's duration


def check_latency(latency: Any) -> None:
    """Refuse a call duration that is not a finite number of seconds from 0 to a week."""
    if latency is None:
        return
    if (
        isinstance(latency, bool)
        or not isinstance(latency, int | float)
        or not math.isfinite(latency)
        or not 0 <= latency <= MAX_LATENCY
    ):
        raise InvalidOperationError(
            f"latency must be the call's seconds, from 0 to {MAX_LATENCY:.0f}, got {latency!r:.40}"
        )


def tenant_scoped_id(tenant: str, chosen: UUID) -> UUID:
    """The id of the context a tenant creates under an id of its choosing: derived from both,
    so one tenant's ids never meet another's and cannot be probed from another tenant."""
    return uuid5(CHOSEN_NAMESPACE, f"{tenant}\x00{chosen}")


def check_page(limit: Any, after: Any) -> UUID | None:
    """A listing's page: `limit` contexts (1..MAX_PAGE) after the context `after` names
    (None: from the first); raises InvalidOperationError."""
    check_int(limit, "limit", low=1, high=MAX_PAGE)
    if after is None or isinstance(after, UUID):
        return after
    try:
        return UUID(str(after))
    except ValueError:
        raise InvalidOperationError(f"after must be a context id, got {after!r:.80}") from None
