"""How the ADK session service keeps an event in a message and reads a session back from
them: an event as a Gemini message (or a record), and the session's own state, last update
and event times folded from its stored messages' metadata, without building an Event."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, TypeVar

from ctxstore.domain.errors import MissingExtraError

try:
    from google.adk.events.event import Event
    from google.adk.sessions import _session_util
    from google.adk.sessions.base_session_service import GetSessionConfig
except ModuleNotFoundError as exc:  # the extra is not installed: say which
    raise MissingExtraError("the Google ADK session service", "adk") from exc

from ctxstore.adapters.integrations.sdk_messages import as_record
from ctxstore.domain.gemini import GEMINI
from ctxstore.domain.messages import Message
from ctxstore.domain.shapes import read_native

EVENT = "adk_event"  # metadata: the ADK event, as its JSON
CREATED = "adk_session"  # metadata of the first record: the state given and when
STATE = "adk_state"  # metadata of an app's or a user's state record
T = TypeVar("T")


class Folded(NamedTuple):
    """A session's own state, last update and event times, folded from its stored
    messages' metadata at one head mark (any write or erasure changes the mark)."""

    mark: tuple[int, int]
    visible: int  # messages visible
    state: dict[str, Any]
    updated: float
    times: list[tuple[float, int]]  # (event time, position among the visible), time order


def event_message(event: Event) -> dict[str, Any]:
    """The ctxstore message keeping one ADK event: its Content as a Gemini message (the rest
    of the event in its metadata), or a record."""
    kept = json.loads(event.model_dump_json(exclude_none=True))
    content = kept.get("content")
    if isinstance(content, dict) and content.get("parts"):
        del kept["content"]  # kept once, as the message's payload
        role = read_native(content, GEMINI).role
        return {"format": GEMINI, "role": role, "native": content, "metadata": {EVENT: kept}}
    return event_record(event)


def event_record(event: Event) -> dict[str, Any]:
    """An event kept as a record only: one without content, or one whose content would break
    Gemini's pairing where ADK's flow allows it (a call answered later, after other turns:
    a long-running tool, a credential request). ADK's session is never refused an event."""
    return as_record({EVENT: json.loads(event.model_dump_json(exclude_none=True))})


def asked(kept: list[tuple[float, T]], config: GetSessionConfig | None) -> list[tuple[float, T]]:
    """The events GetSessionConfig asks for, of a session's events in time order: after a
    time, then the last N."""
    if config is not None and config.after_timestamp:
        kept = [k for k in kept if k[0] >= config.after_timestamp]
    if config is not None and config.num_recent_events is not None:
        recent = config.num_recent_events
        kept = kept[-recent:] if recent else []
    return kept


def fold(mark: tuple[int, int], metas: list[dict[str, Any]]) -> Folded:
    """`_scan` over stored metadata: the state, last update and event times by position."""
    state, updated = scan_state(metas)
    times = [(float(m[EVENT]["timestamp"]), p) for p, m in enumerate(metas) if p and EVENT in m]
    times.sort(key=lambda t: t[0])  # stable: equal times keep their append order
    return Folded(mark, len(metas), state, updated, times)


def stored_event_json(stored: dict[str, Any]) -> dict[str, Any]:
    """`_event_json` of a stored message's JSON (no Message built)."""
    kept = dict(stored["metadata"][EVENT])
    if stored.get("native") is not None:
        kept["content"] = stored["native"]
    return kept


def event_json(m: Message) -> dict[str, Any]:
    """The event a message keeps, as its JSON (its Content put back where it was)."""
    kept = dict(kept_under(m, EVENT))
    if m.native is not None:  # (a Gemini message: a record holds no payload)
        kept["content"] = m.native
    return kept


def kept_under(message: Message, key: str) -> dict[str, Any]:
    """What this service keeps in a message's metadata under `key` (always an object)."""
    kept: dict[str, Any] = message.metadata[key]  # type: ignore[assignment]
    return kept


def scan_state(metas: Sequence[Mapping[str, Any]]) -> tuple[dict[str, Any], float]:
    """A session's own state and last update, from its messages' metadata: the events' JSON
    (no Event built)."""
    created = metas[0][CREATED]
    state = dict(created["state"])
    updated = float(created["created"])
    for meta in metas[1:]:
        if EVENT not in meta:
            continue
        kept = meta[EVENT]
        delta = (kept.get("actions") or {}).get("state_delta")
        if delta:
            state.update(_session_util.extract_json_safe_state_delta(delta)["session"])
        updated = float(kept["timestamp"])
    return state, updated


def scan(messages: list[Message]) -> tuple[dict[str, Any], list[tuple[float, Message]], float]:
    """`_scan_state`, and the messages keeping events with their times, in time order
    (ties in append order): what Events are built from, the ones asked for only."""
    state, updated = scan_state([m.metadata for m in messages])
    kept = [
        (float(kept_under(m, EVENT)["timestamp"]), m) for m in messages[1:] if EVENT in m.metadata
    ]
    kept.sort(key=lambda k: k[0])  # stable: equal times keep their append order
    return state, kept, updated


__all__ = [
    "CREATED",
    "EVENT",
    "STATE",
    "Folded",
    "asked",
    "event_json",
    "event_message",
    "event_record",
    "fold",
    "kept_under",
    "scan",
    "scan_state",
    "stored_event_json",
]  # fmt: skip
