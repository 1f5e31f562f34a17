"""Stored events carry their schema version; a newer class upcasts old stored events."""

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

from eventsourcing.domain import Aggregate
from eventsourcing.persistence import StoredEvent
from eventsourcing.utils import get_topic

from ctxstore.adapters.settings import Settings
from ctxstore.adapters.storage.codec.chain import unseal
from ctxstore.adapters.store.facade import ContextStore
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
        raw = list(store._storage.recorder.select_events(cid))
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
        cls = getattr(Context, name)
        version = getattr(cls, "class_version", None)
        assert isinstance(version, int) and version >= 1, name
        for v in range(1, version):  # every older stored form can be read
            assert callable(getattr(cls, f"upcast_v{v}_v{v + 1}", None)), (name, v)


def test_events_written_before_chaining_and_usage_v1_still_read(tmp_path):
    """Rows stored by an earlier release (no chain, UsageRecorded v1) read and verify."""
    with ContextStore.from_url(f"sqlite:///{tmp_path / 'new.db'}") as store:
        cid = store.create(actor="old")
        store.insert(cid, [{"role": "user", "content": "hi"}], actor="old")
        raw = list(store._storage.recorder.select_events(cid))
    # Rewrite both rows as the earlier release stored them: JSON without a chain.
    old_rows = [
        StoredEvent(r.originator_id, r.originator_version, r.topic, unseal(r.state)[0]) for r in raw
    ]
    usage_v1 = {
        "timestamp": {"_type_": "datetime_iso", "_data_": "2026-01-01T00:00:00+00:00"},
        "for_version": 2, "model": "gpt-4o", "prompt_tokens": 9, "completion_tokens": 1,
        "counted_tokens": 8, "estimated": False, "batch": 0, "actor": "old",
    }  # fmt: skip
    old_rows.append(
        StoredEvent(cid, 3, get_topic(Context.UsageRecorded), json.dumps(usage_v1).encode())
    )
    with ContextStore.from_url(f"sqlite:///{tmp_path / 'old.db'}") as store:
        store._storage.recorder.insert_events(old_rows)
        call = store.call(cid, 1)
        assert call.whole_context and [m.text() for m in call.messages or []] == ["hi"]
        store.insert(cid, [{"role": "assistant", "content": "hello"}], actor="new")
        result = store.verify(cid)
        assert result.ok and result.unchained == 3 and result.events == 4


def test_an_audit_index_from_before_tenants_gains_the_column(durable_url):
    """An index written by the previous release (no tenant column) is altered in place and
    keeps its rows; new rows carry their tenant, and old contexts belong to none."""
    with ContextStore.from_url(durable_url) as store:
        old = store.create(name="before tenants")
        store.insert(old, [{"role": "user", "content": "hi"}])
        assert store.audit().entries  # indexed
        table = "ctxstore_audit"
        if "sqlite" in durable_url:
            with store._storage.recorder.datastore.transaction(commit=True) as c:
                c.execute(f"DROP INDEX IF EXISTS {table}_tenant_idx")
                c.execute(f"ALTER TABLE {table} DROP COLUMN tenant")
                c.execute("DROP TABLE ctxstore_migrations")  # a release before versions
        else:
            from psycopg.sql import SQL, Identifier

            with store._storage.recorder.datastore.transaction(commit=True) as c:
                c.execute(
                    SQL("ALTER TABLE {0} DROP COLUMN tenant").format(
                        store._storage.audit_index.table
                    )
                )
                schema = store._storage.recorder.datastore.schema
                c.execute(SQL("DROP TABLE {0}").format(Identifier(schema, "ctxstore_migrations")))
    with ContextStore.from_url(durable_url) as store:
        mine = store.create(name="acme's", tenant="acme")
        store.insert(mine, [{"role": "user", "content": "hello"}])
        assert [e.context_id for e in store.audit(tenant="acme").entries] == [mine, mine]
        assert {e.context_id for e in store.audit().entries} == {old, mine}
        assert store.hooks.tenant_of(old) is None and store.hooks.tenant_of(mine) == "acme"


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ADDED_SINCE = {"audio": None}  # message fields added after that release: they read as null


def with_added_fields(visible: dict) -> dict:
    """What that release showed, with each message's later fields as old messages read."""
    return {**visible, "messages": [{**m, **ADDED_SINCE} for m in visible["messages"]]}


def test_a_store_written_by_the_first_release_replays_the_same(tmp_path):
    """tests/fixtures/legacy_v0.db holds events as the first releases stored them (no chain,
    ContextCreated and UsageRecorded at class_version 1, no audit index); they are upcast
    and replay to the visible context that release showed."""
    db = tmp_path / "legacy.db"
    shutil.copy(FIXTURES / "legacy_v0.db", db)
    expected = json.loads((FIXTURES / "legacy_v0.expected.json").read_text())
    raw = sqlite3.connect(db).execute("SELECT state FROM stored_events").fetchall()
    assert all(b'"chain"' not in r[0] and b'"tenant"' not in r[0] for r in raw)
    with ContextStore.from_url(f"sqlite:///{db}") as store:
        cid = expected["context_id"]
        seen = store.visible(cid).model_dump(mode="json", exclude={"modified_at"})
        assert seen == with_added_fields(expected["visible"])
        history = [[h.version, h.type, h.actor, h.reverted] for h in store.history(cid)]
        assert history == expected["history"]
        at_9 = [m.model_dump(mode="json") for m in store.visible(cid, at_version=9).messages]
        assert at_9 == with_added_fields({"messages": expected["visible_at_9"]})["messages"]
        assert store.hooks.tenant_of(cid) is None
        assert store.call(cid, 1).whole_context  # usage v1: the whole context was sent
        assert len(store.audit(limit=1000).entries) == 13  # indexed now, from the old events
        result = store.verify()
        assert result.ok and result.unchained == 13
        store.insert(cid, [{"role": "user", "content": "written by this release"}])
        assert store.verify().ok and store.verify().unchained == 13
