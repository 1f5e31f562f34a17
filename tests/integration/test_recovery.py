"""The persisted audit index records how far it got; damaged, it is rebuilt from events to
the same result."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ctxstore.adapters.store.facade import ContextStore


def seed(store: ContextStore) -> None:
    for n in range(3):
        cid = store.create(name=f"c{n}", actor=f"actor{n}")
        for i in range(12):
            store.insert(cid, [{"role": "user", "content": f"m{i}"}], actor=f"actor{n}")
        store.batch_start(cid)
        store.insert(cid, [{"role": "user", "content": "undone"}])
        store.batch_end(cid)


def snapshot(store: ContextStore) -> list:
    page = store.audit(limit=1000)
    return [e.model_dump() for e in page.entries]


def execute(store: ContextStore, statement: str) -> None:
    """Run SQL on the store's own database (the audit table unqualified; PostgreSQL's in
    the store's schema)."""
    if "sqlite" in store.url:
        with store._storage.recorder.datastore.transaction(commit=True) as c:  # type: ignore[attr-defined]
            c.execute(statement)
    else:
        schema = store._storage.recorder.datastore.schema  # type: ignore[attr-defined]
        with store._storage.recorder.datastore.transaction(commit=True) as c:  # type: ignore[attr-defined]
            c.execute(f'SET LOCAL search_path TO "{schema}"')
            c.execute(statement)


def tracking_table(store: ContextStore) -> str:
    return "tracking" if "sqlite" in store.url else "ctxstore_audit_tracking"


DAMAGE: dict[str, Callable[[ContextStore], str]] = {
    "table dropped": lambda s: "DROP TABLE ctxstore_audit",
    "rows deleted": lambda s: "DELETE FROM ctxstore_audit",
    "newest rows deleted": lambda s: "DELETE FROM ctxstore_audit WHERE position > 30",
    "tracking behind": lambda s: f"UPDATE {tracking_table(s)} SET notification_id = 5",
    "tracking ahead": lambda s: f"UPDATE {tracking_table(s)} SET notification_id = 10000",
    "tracking deleted": lambda s: f"DELETE FROM {tracking_table(s)}",
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_index_is_rebuilt_on_restart(durable_url, damage):
    with ContextStore.from_url(durable_url) as store:
        seed(store)
        before = snapshot(store)
        assert len(before) == 3 * 16
        execute(store, DAMAGE[damage](store))
    with ContextStore.from_url(durable_url) as store:
        assert snapshot(store) == before
        assert store.verify().ok
        store.insert(store.contexts()[0].context_id, [{"role": "user", "content": "after"}])
        assert len(snapshot(store)) == len(before) + 1


def test_edited_rows_are_rebuilt_by_reindex(durable_url):
    with ContextStore.from_url(durable_url) as store:
        seed(store)
        before = snapshot(store)
        execute(store, "UPDATE ctxstore_audit SET actor = 'mallory', reverted_by = NULL")
        assert snapshot(store) != before  # the edit is not detected by counting
        assert store.admin.rebuild_audit_index() == before[-1]["position"]
        assert snapshot(store) == before
