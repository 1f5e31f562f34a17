"""The write ladder (adapters/store/write_attempt.py) is one for both writers: the sync and
the async store answer each failure of an insert alike."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from psycopg.sql import SQL, Identifier

from ctxstore.adapters.storage.postgres_schema import MOVED_TABLE
from ctxstore.adapters.store.async_store import AsyncContextStore
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.domain.errors import ContextMovedError


def _tombstone(store: ContextStore, cid) -> None:
    """What `ctxstore move` leaves on the server a context left."""
    storage: Any = store._storage
    schema = Identifier(storage.backend.schema)
    with storage.recorder.datastore.transaction(commit=True) as c:
        c.execute(
            SQL("INSERT INTO {0}.{1} (context_id, shard) VALUES (%s, 'elsewhere')").format(
                schema, Identifier(MOVED_TABLE)
            ),
            (cid,),
        )


@pytest.mark.postgres
def test_a_write_to_a_moved_context_is_refused_as_moved_on_both_writers(pg_url):
    async def scenario() -> None:
        async with await AsyncContextStore.open(pg_url) as astore:
            cid = await astore.create(name="moving")
            await astore.insert(cid, [{"role": "user", "content": "before"}])
            _tombstone(astore.sync, cid)
            with pytest.raises(ContextMovedError):
                await astore.insert(cid, [{"role": "user", "content": "after"}])
            with pytest.raises(ContextMovedError):
                astore.sync.insert(cid, [{"role": "user", "content": "after"}])

    asyncio.run(scenario())
