"""A context whose stored events were damaged behind the store's back reads as a typed
DamagedContextError naming the context and the version, never a library error or a
crash; `verify` names the broken link (reads check the stream's shape, not the chain)."""

import pytest
from psycopg.sql import SQL, Identifier

from ctxstore.adapters.http.problems import for_error
from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.domain.errors import DamagedContextError

DAMAGE = {
    "a middle event deleted": ("DELETE FROM {t} WHERE originator_id = %s AND originator_version = 3", "version 3"),
    "a topic changed": ("UPDATE {t} SET topic = 'x.y:Z' WHERE originator_id = %s AND originator_version = 3", "TopicError"),
    "the first event deleted": ("DELETE FROM {t} WHERE originator_id = %s AND originator_version = 1", "creation|version 1"),
}  # fmt: skip


def run_sql(store: ContextStore, statement: str, cid) -> None:
    recorder = store._storage.recorder
    table = recorder.events_table_name  # type: ignore[attr-defined]
    datastore = recorder.datastore  # type: ignore[attr-defined]
    if store.url.startswith("sqlite"):
        with datastore.transaction(commit=True) as c:
            c.execute(statement.format(t=table).replace("%s", "?"), (cid.hex,))
    else:
        qualified = Identifier(datastore.schema, table)
        with datastore.transaction(commit=True) as c:
            c.execute(SQL(statement).format(t=qualified), (cid,))


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_streams_read_as_typed_errors(durable_url, damage):
    statement, names = DAMAGE[damage]
    with ContextStore.from_url(durable_url, Settings(actor="t", snapshot_interval=1000)) as store:
        cid = store.create()
        for n in range(5):
            store.insert(cid, [{"role": "user", "content": f"m{n}"}])
        run_sql(store, statement, cid)
        store._core.cache.drop(cid)
        reads = [
            lambda: store.visible(cid),
            lambda: store.history(cid),
            lambda: store.visible(cid, at_version=4),
            lambda: store.insert(cid, [{"role": "user", "content": "more"}]),
            lambda: store.build_prompt(cid, 1000),
        ]
        for read in reads:
            with pytest.raises(DamagedContextError, match=f"{cid}.*({names})"):
                read()
        assert not store.verify(cid).ok
        assert for_error(DamagedContextError("x")).status_code == 500
