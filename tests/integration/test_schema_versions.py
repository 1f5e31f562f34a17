"""Stored events carry their schema version; a newer class upcasts old stored events."""

from typing import Any

from eventsourcing.domain import Aggregate

from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store import ContextStore
from ctxstore.domain.context import Context
from ctxstore.projections.history import EVENT_TYPES


def test_an_old_stored_event_is_upcast_on_read(durable_url, monkeypatch):
    with ContextStore.from_url(durable_url, Settings(snapshot_interval=1000)) as store:
        cid = store.create()
        store.insert(cid, [{"role": "user", "content": "stored as version 1"}], actor="old-sdk")

    def upcast_v1_v2(state: dict[str, Any]) -> None:
        state["actor"] = f"{state['actor']} (upcast)"

    # A later release bumps the schema; the stored v1 event is upcast as it is read.
    monkeypatch.setattr(Context.MessagesInserted, "class_version", 2, raising=False)
    monkeypatch.setattr(
        Context.MessagesInserted, "upcast_v1_v2", staticmethod(upcast_v1_v2), raising=False
    )
    with ContextStore.from_url(durable_url, Settings(snapshot_interval=1000)) as store:
        hist = store.history(cid)
        assert hist[1].actor == "old-sdk (upcast)"
        assert store.visible(cid).messages[0].text() == "stored as version 1"
        store.insert(cid, [{"role": "user", "content": "stored as version 2"}], actor="new-sdk")
        raw = list(store.recorder.select_events(cid))
        assert b'"class_version":2' in raw[-1].state.replace(b" ", b"")
        assert store.history(cid)[2].actor == "new-sdk"


def test_every_event_class_is_versioned_and_shown_in_history():
    """A new event type must declare its schema version and appear in the history's types."""
    declared = {
        name
        for name, value in vars(Context).items()
        if isinstance(value, type)
        and issubclass(value, Context.Event)
        and name not in vars(Aggregate)
    }
    assert declared == set(EVENT_TYPES)
    for name in declared:
        assert getattr(getattr(Context, name), "class_version", None) == 1, name
