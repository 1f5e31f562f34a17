"""memory://'s recorders: the library's in-memory ones, from which a context can be erased.

The library keeps a recorder's events in one list, a notification's id being its place in
it. An erased event's place is emptied (it holds ERASED), never removed: the ids after it
stay what they were, and none is given out again, as a database's rising ids. Like
SQLite's and PostgreSQL's recorders, the events' recorder refuses an append whose previous
version is gone (storage/turns.GONE): a writer that read the context before its erasure
would otherwise store it on nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from threading import RLock
from typing import Any
from uuid import UUID

from eventsourcing.persistence import IntegrityError, Notification, StoredEvent
from eventsourcing.popo import POPOAggregateRecorder, POPOApplicationRecorder

from ctxstore.adapters.storage.erasers import Erasure
from ctxstore.adapters.storage.turns import GONE

ERASED = StoredEvent(UUID(int=0), 0, "", b"")  # an erased event's place: no content


def erase_rows(recorder: POPOAggregateRecorder, cid: UUID) -> int:
    """Empty the places of a context's rows; how many it had."""
    with recorder._database_lock:
        places = recorder._stored_events_index.pop(str(cid), {})
        for place in places.values():
            recorder._stored_events[place] = ERASED
        return len(places)


class MemorySnapshotsRecorder(POPOAggregateRecorder):
    """The snapshots of a memory:// store."""

    def erase(self, cid: UUID) -> int:
        return erase_rows(self, cid)


class MemoryEventsRecorder(POPOApplicationRecorder):
    """The events of a memory:// store, with its erasure records (`erasures`, oldest
    first: they name no content)."""

    def __init__(self) -> None:
        super().__init__()
        self.erasures: list[Erasure] = []
        self._erased: Counter[UUID] = Counter()  # erasures by context: asked at each append

    @property
    def lock(self) -> RLock:
        """Held by an erasure from its first deletion to its record: no append, and no
        audit page stored, comes in between."""
        return self._database_lock

    def erase(self, cid: UUID) -> int:
        return erase_rows(self, cid)

    def keep(self, record: Erasure) -> None:
        """Keep an erasure's record."""
        with self._database_lock:
            self.erasures.append(record)
            self._erased[record.context_id] += 1

    def holds(self, notification_id: int) -> bool:
        """Whether the event of a notification id is still stored (not erased)."""
        with self._database_lock:
            return self._stored_events[notification_id - 1] is not ERASED

    def erasures_of(self, cid: UUID) -> int:
        """How many times the context was erased (storage/backend.erasures_of)."""
        with self._database_lock:
            return self._erased[cid]

    def select_after(self, cid: UUID, gt: int) -> tuple[Sequence[StoredEvent], int]:
        """The context's events after version `gt`, and erasures_of, read together."""
        with self._database_lock:
            return self.select_events(cid, gt=gt), self.erasures_of(cid)

    def _assert_uniqueness(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> None:
        """The library's check, and: the first event (past a creation) is stored only if the
        version before it is there and, when the writer says how many times the context had
        been erased when it read its state (`erasures`), the count is still that (an
        erasure, then the context made again under its id, leaves the version in place).
        Runs under the recorder's lock, as the insert does."""
        super()._assert_uniqueness(stored_events, **kwargs)
        first = stored_events[0] if stored_events else None
        if first is None or first.originator_version <= 1:
            return
        cid = first.originator_id
        before = self._stored_events_index.get(str(cid), {})
        erasures = kwargs.get("erasures")
        if first.originator_version - 1 not in before or (
            erasures is not None and self.erasures_of(UUID(str(cid))) != erasures
        ):
            raise IntegrityError(GONE)

    def select_notifications(
        self, start: int | None, limit: int, stop: int | None = None,
        topics: Sequence[str] = (), *, inclusive_of_start: bool = True,
    ) -> Sequence[Notification]:  # fmt: skip
        """The library's read, passing over erased events' places."""
        if start is None:
            start, inclusive_of_start = 1, True
        first = max(start if inclusive_of_start else start + 1, 1)
        found: list[Notification] = []
        with self._database_lock:
            last = len(self._stored_events) if stop is None else min(stop, len(self._stored_events))
            for n in range(first, last + 1):
                s = self._stored_events[n - 1]
                if s is ERASED or (topics and s.topic not in topics):
                    continue
                found.append(
                    Notification(
                        id=n, originator_id=s.originator_id,
                        originator_version=s.originator_version, topic=s.topic, state=s.state,
                    )
                )  # fmt: skip
                if len(found) == limit:
                    break
        return found


__all__ = ["ERASED", "MemoryEventsRecorder", "MemorySnapshotsRecorder"]
