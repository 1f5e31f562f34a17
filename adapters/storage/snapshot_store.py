"""Snapshots that name where their messages are instead of copying them.

A context's snapshot holds every visible message and each open batch's saved ones, and
every one of those messages is also in the event that added it: its entry keeps that
event's version. Copying them made each snapshot about as large as the messages themselves,
on top of the events; and a context that grows leaves a ladder of snapshots
(adapters/storage/snapshot_policy.py) whose deleted rungs hold their space until PostgreSQL's vacuum
reuses it. So a snapshot is stored without its messages, marked MESSAGES_IN_EVENTS, and
reading it fetches the events at its entries' versions in one query per 500 versions (a
cost tied to the visible size, not to the history's length) and puts each message back: the
domain gets back the very snapshot it took. Snapshots stored with their messages (before
this) read as they were.

If an event that a snapshot names cannot be read, the snapshot is passed over and the
context is rebuilt from its events alone: slower, never wrong.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, cast
from uuid import UUID

import orjson
from eventsourcing.persistence import (
    AggregateRecorder,
    EventStore,
    Mapper,
    Recording,
    StoredEvent,
)
from eventsourcing.utils import get_topic

from ctxstore.adapters.storage.codec.chain import ChainingMapper
from ctxstore.domain.context import JSON, Context

MESSAGES_IN_EVENTS = "messages_in_events"  # a stored snapshot's mark: entries hold no message
# The backend's read of a context's events at some versions: (version, topic, state).
EventRows = Callable[[Any, UUID, Sequence[int]], Iterable[tuple[int, str, bytes]]]
INSERTED = get_topic(Context.MessagesInserted)
REPLACED = get_topic(Context.MessageReplaced)
COMPRESSED = get_topic(Context.MessagesCompressed)
FORKED = get_topic(Context.ContextForked)
EXPANDED = get_topic(Context.SummaryExpanded)
BEGUN = get_topic(Context.MessageBegun)
CARRIERS = {  # the events that add messages, and the schema version each is written in
    INSERTED: Context.MessagesInserted,
    REPLACED: Context.MessageReplaced,
    COMPRESSED: Context.MessagesCompressed,
    FORKED: Context.ContextForked,
    EXPANDED: Context.SummaryExpanded,
    BEGUN: Context.MessageBegun,
}
log = logging.getLogger(__name__)


class UnresolvedSnapshotError(LookupError):
    """A message a snapshot names is not in the event at the version it gives."""


class SnapshotStore(EventStore[UUID]):
    """The library's snapshot store, storing snapshots without their messages."""

    def __init__(
        self, mapper: Mapper[UUID], recorder: AggregateRecorder, events: AggregateRecorder,
        event_rows: EventRows,
    ) -> None:  # fmt: skip
        super().__init__(mapper, recorder)
        self.events = events
        self.event_rows = event_rows  # the backend's read of events by version

    def put(self, domain_events: Sequence[Any], **kwargs: Any) -> list[Recording[UUID]]:
        return super().put([without_messages(s) for s in domain_events], **kwargs)

    def stored(self, snapshot: Any) -> StoredEvent:
        """A snapshot as this store stores it (for a bulk loader writing rows itself)."""
        return self.mapper.to_stored_event(without_messages(snapshot))

    def get(
        self,
        originator_id: UUID,
        *,
        gt: int | None = None,
        lte: int | None = None,
        desc: bool = False,
        limit: int | None = None,
    ) -> Iterator[Any]:
        found = []
        while True:
            passed_over = None
            for read in super().get(originator_id, gt=gt, lte=lte, desc=desc, limit=limit):
                snapshot = cast(Any, read)
                if isinstance(snapshot.state, dict) and MESSAGES_IN_EVENTS in snapshot.state:
                    try:
                        snapshot = self._with_messages(snapshot)
                    except UnresolvedSnapshotError as exc:
                        log.warning(
                            "snapshot of context %s at version %d passed over: %s",
                            originator_id,
                            snapshot.originator_version,
                            exc,
                        )
                        passed_over = snapshot.originator_version
                        continue
                found.append(snapshot)
            # The newest was passed over (it names events retention removed since): the
            # next older one may still serve, as the repository asks for one only.
            if not (desc and limit and passed_over is not None and len(found) < limit):
                return iter(found)
            lte = passed_over - 1

    def _with_messages(self, snapshot: Any) -> Any:
        state = dict(snapshot.state)
        del state[MESSAGES_IN_EVENTS]
        wanted = {e["version"] for e in state["entries"].values() if "message" not in e}
        wanted.update(
            e["version"]
            for s in state["savepoints"]
            for e in s["entries"].values()
            if e and "message" not in e
        )
        messages = self._messages_at(snapshot.originator_id, wanted)

        def full(msg_id: str, entry: JSON) -> JSON:
            if "message" in entry:  # kept inline: no event carries it as it stands
                return entry
            message = messages.get((entry["version"], msg_id))
            if message is None:
                raise UnresolvedSnapshotError(
                    f"message {msg_id} is not in the event at version {entry['version']}"
                )
            return {"message": message, **entry}

        return _replaced_state(snapshot, map_entries(state, full))

    def _messages_at(self, cid: UUID, versions: set[int]) -> dict[tuple[int, str], JSON]:
        """The messages that the context's events at `versions` add, by (version, id)."""
        found: dict[tuple[int, str], JSON] = {}
        mapper = cast(ChainingMapper, self.mapper)
        for version, topic, state in self.event_rows(self.events, cid, sorted(versions)):
            if topic not in CARRIERS:
                continue
            body = _loads(mapper.plaintext(state, cid))
            if body.get("class_version", 1) != getattr(CARRIERS[topic], "class_version", 1):
                # Stored in an earlier schema of its event: the library upcasts it.
                event = mapper.to_domain_event(StoredEvent(cid, version, topic, state))
                body = dict(vars(event))
            for message in carried_messages(topic, body):
                found[(version, message["id"])] = message
        return found


def without_messages(snapshot: Any) -> Any:
    """A context snapshot's stored form: its entries without their messages."""
    state = snapshot.state
    if not isinstance(state, dict) or "entries" not in state or MESSAGES_IN_EVENTS in state:
        return snapshot
    bare = map_entries(
        state, lambda _, e: e if e.get("inline") else {k: v for k, v in e.items() if k != "message"}
    )
    bare[MESSAGES_IN_EVENTS] = True
    return _replaced_state(snapshot, bare)


def map_entries(state: JSON, change: Callable[[str, JSON], Any]) -> JSON:
    """A copy of a snapshot's state with `change(id, entry)` in place of each entry, the
    head's and each open batch's (whose None, "as the head holds it", stays None)."""
    return {
        **state,
        "entries": {i: change(i, e) for i, e in state["entries"].items()},
        "savepoints": [
            {**s, "entries": {i: e if e is None else change(i, e) for i, e in s["entries"].items()}}
            for s in state["savepoints"]
        ],
    }


def carried_messages(topic: str, body: JSON) -> list[JSON]:
    """The messages an event (its decoded state) adds to its context."""
    if topic == INSERTED:
        return cast(list[JSON], body["messages"])
    if topic in (REPLACED, BEGUN):
        return [body["message"]]
    if topic == COMPRESSED:
        return [body["summary"]]
    if topic in (FORKED, EXPANDED):
        return [e["message"] for e in body["entries"]]
    return []


def _replaced_state(snapshot: Any, state: JSON) -> Any:
    return type(snapshot)(
        originator_id=snapshot.originator_id,
        originator_version=snapshot.originator_version,
        timestamp=snapshot.timestamp,
        topic=snapshot.topic,
        state=state,
    )


def _loads(data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:  # an integer past 64 bits: the standard decoder reads it
        return json.loads(data)
