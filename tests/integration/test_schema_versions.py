"""Stored events carry their schema version; a newer class upcasts old stored events."""

from typing import Any

import pytest

from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store import ContextStore
from ctxstore.domain.context import Context

EVENT_CLASSES = [
    Context.ContextCreated,
    Context.MessagesInserted,
    Context.MessagesDeleted,
    Context.MessageReplaced,
    Context.MessagesCompressed,
    Context.BatchStarted,
    Context.BatchEnded,
]


def test_every_event_type_declares_its_schema_version():
    for cls in EVENT_CLASSES:
        assert getattr(cls, "class_version", None) == 1, cls.__name__


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


@pytest.mark.parametrize("cls", EVENT_CLASSES)
def test_event_types_are_named_as_the_design_says(cls):
    assert cls.__qualname__.startswith("Context.")
