"""The SQLite recorder's short path into a write transaction behaves as the library's."""

import uuid
from pathlib import Path

import pytest
from eventsourcing.persistence import IntegrityError, StoredEvent
from eventsourcing.sqlite import SQLiteApplicationRecorder

from ctxstore.adapters.storage.sqlite_recorder import SQLiteEventsRecorder
from ctxstore.adapters.store.facade import ContextStore


def test_a_refused_insert_rolls_back_and_returns_its_connection(tmp_path: Path) -> None:
    # The pool has one writer: had the failed insert kept it, the next write would wait for
    # the pool's timeout and fail instead of going ahead.
    with ContextStore.from_url(f"sqlite:///{tmp_path / 's.db'}") as store:
        recorder = store._storage.recorder
        assert isinstance(recorder, SQLiteEventsRecorder)
        assert isinstance(recorder, SQLiteApplicationRecorder)
        cid = store.create(name="r")
        store.insert(cid, {"role": "user", "content": "one"})
        taken = recorder.select_events(cid)[-1]  # version 2
        fresh = StoredEvent(cid, taken.originator_version + 1, taken.topic, taken.state)
        with pytest.raises(IntegrityError):
            # Two rows in one call: the new one, then a version that is taken. Neither stays.
            recorder.insert_events([fresh, taken])
        assert [e.originator_version for e in recorder.select_events(cid)] == [1, 2]
        for n in range(3):  # the writer connection went back to the pool
            store.insert(cid, {"role": "user", "content": f"after {n}"})
        assert [m.text() for m in store.visible(cid).messages] == [
            "one",
            "after 0",
            "after 1",
            "after 2",
        ]
        other = uuid.uuid4()  # another stream: the library's return, notification ids
        positions = recorder.insert_events([StoredEvent(other, 1, "t", b"{}")])
        assert positions is not None and len(positions) == 1 and positions[0] > 0
