"""Erasure: a context's contents leave the database; a record of the erasure stays; every
other context is intact and verifies. On memory:// too: its database is its objects."""

from __future__ import annotations

import gc
import subprocess
import sys
import threading
import types
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from ctxstore import ContextNotFoundError, InvalidOperationError
from ctxstore.adapters.http import create_app
from ctxstore.adapters.settings import ServiceConfig, Settings
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.adapters.store.parts import parts_of

from ..conftest import make_url
from .test_at_rest import raw_bytes

SECRET = "ERASE-ME-4f2a 个人信息"
NOT_DATA = (type, types.ModuleType, types.FunctionType, types.MethodType, types.BuiltinFunctionType)


def held_bytes(url: str, store: ContextStore) -> bytes:
    """Everything the store's database holds, as bytes; for memory://, every text and bytes
    its storage's objects reach (recorders, audit index, keys, blobs, erasure records)."""
    if not url.startswith("memory"):
        return raw_bytes(url, store)
    found, seen, todo = [], set(), [parts_of(store).storage]
    while todo:
        obj = todo.pop()
        if id(obj) in seen or isinstance(obj, NOT_DATA):  # code, not what it stored
            continue
        seen.add(id(obj))
        if isinstance(obj, str):
            found.append(obj.encode("utf-8", "surrogatepass"))
        elif isinstance(obj, bytes | bytearray):
            found.append(bytes(obj))
        else:
            todo.extend(gc.get_referents(obj))
    return b"\n".join(found)


def test_erasing_a_context_leaves_no_content_and_a_record(store_url):
    with ContextStore.from_url(store_url, Settings(snapshot_interval=8)) as store:
        gone = store.create(name="alice's chat", metadata={"user": "alice"})
        for i in range(20):
            store.insert(gone, [{"role": "user", "content": f"{SECRET} {i}"}])
        store.batch_start(gone)
        store.insert(gone, [{"role": "user", "content": SECRET}])
        kept = store.create(name="bob's chat")
        store.insert(kept, [{"role": "user", "content": "keep this"}])
        store.batch_start(kept)
        store.insert(kept, [{"role": "assistant", "content": "and this"}])
        before = store.visible(kept).model_dump()

        # Requests about it through the service leave stored responses: erased too.
        def prompt() -> Any:
            with TestClient(create_app(store, ServiceConfig())) as client:
                return client.post(f"/v1/contexts/{gone}/prompt", json={"budget": 4000},
                                   headers={"Idempotency-Key": "p1"})  # fmt: skip

        assert SECRET in prompt().text
        snapshots = parts_of(store).storage.snapshots.recorder
        assert snapshots.select_events(gone)  # (compressed: the byte scans cannot see into them)
        assert SECRET.encode() in held_bytes(store_url, store)

        record = store.erase(gone, reason="GDPR art. 17 request #42", actor="dpo")
        assert (record.context_id, record.actor, record.events) == (gone, "dpo", 23)
        assert store.erasures() == [record]
        data = held_bytes(store_url, store)
        assert SECRET.encode() not in data and b"alice" not in data
        assert SECRET.split()[0].encode() not in data  # (a stored response escapes the rest)
        assert snapshots.select_events(gone) == []
        assert prompt().status_code == 404  # not the stored response, replayed
        with pytest.raises(ContextNotFoundError):
            store.visible(gone)
        with pytest.raises(ContextNotFoundError):
            store.erase(gone, reason="again")
        assert all(e.context_id != gone for e in store.audit(limit=1000).entries)
        assert store.visible(kept).model_dump() == before
        result = store.verify()
        assert result.ok and (result.contexts, result.events) == (1, 4), result
        store.insert(kept, [{"role": "user", "content": "still writable"}])
    if store_url.startswith("memory"):  # its objects were the only copy, gone with the store
        assert record.residue == []
        return
    # Another process (a fresh store) sees the same.
    with ContextStore.from_url(store_url) as store:
        assert [c.context_id for c in store.contexts()] == [kept]
        assert store.verify().ok
        assert store.erasures()[0].reason == "GDPR art. 17 request #42"


def test_erasure_needs_a_reason(store_url):
    with ContextStore.from_url(store_url) as store:
        cid = store.create()
        with pytest.raises(InvalidOperationError, match="reason"):
            store.erase(cid, reason=" ")
        assert store.visible(cid).version == 1
        assert store.erasures() == []


def test_erasure_over_http_respects_tenants(store_url):
    with ContextStore.from_url(store_url) as store:
        config = ServiceConfig(tokens={"a": "acme", "g": "globex"})
        with TestClient(create_app(store, config)) as client:
            acme = {"Authorization": "Bearer a"}
            cid = client.post("/v1/contexts", json={}, headers=acme).json()["context_id"]
            r = client.delete(f"/v1/contexts/{cid}?reason=asked",
                              headers={"Authorization": "Bearer g"})  # fmt: skip
            assert r.status_code == 404
            r = client.delete(f"/v1/contexts/{cid}", headers=acme)
            assert r.status_code == 422  # no reason
            r = client.delete(f"/v1/contexts/{cid}?reason=asked", headers=acme)
            assert r.status_code == 200 and r.json()["actor"] == "acme"
            assert client.get(f"/v1/contexts/{cid}", headers=acme).status_code == 404


def test_erasure_works_in_a_process_that_never_loaded_the_service(tmp_path):
    # This module imports the HTTP service; a fresh interpreter shows what a script sees.
    script = (
        "import sys, ctxstore\n"
        "store = ctxstore.open(sys.argv[1])\n"
        "cid = store.create()\n"
        "store.insert(cid, {'role': 'user', 'content': 'forget me'})\n"
        "print(store.erase(cid, reason='asked').events)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, f"sqlite:///{tmp_path / 'fresh.db'}"],
        check=False, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "2"


@pytest.mark.slow  # retries the WAL checkpoint for seconds
def test_erasure_says_what_residue_remains(durable_url, tmp_path):
    """SQLite: a reader holding the database open keeps the erased pages in the -wal; the
    erasure sees the checkpoint held up and says so. PostgreSQL: the
    record names what PostgreSQL keeps by design (WAL, replicas, backups, unzeroed space)."""
    import sqlite3

    with ContextStore.from_url(durable_url, Settings(actor="t")) as store:
        clean = store.create()
        store.insert(clean, [{"role": "user", "content": SECRET}])
        held = store.create()
        store.insert(held, [{"role": "user", "content": SECRET}])
        if durable_url.startswith("sqlite"):
            assert store.erase(clean, reason="nothing holds the log").residue == []
            reader = sqlite3.connect(durable_url.removeprefix("sqlite:///"))
            reader.execute("BEGIN")
            reader.execute("SELECT count(*) FROM stored_events").fetchone()  # a snapshot held
            record = store.erase(held, reason="a reader holds the log")
            reader.close()
            assert len(record.residue) == 1 and "-wal" in record.residue[0]
        else:
            record = store.erase(held, reason="postgres")
            assert [r[:35] for r in record.residue] == ["PostgreSQL: the write-ahead log, st"]
        assert store.erasures()[-1].residue == record.residue


def test_erasing_a_context_with_forks_says_so_and_does_what_it_is_told(store_url):
    with ContextStore.from_url(store_url) as store:
        cid = store.create()
        store.insert(cid, [{"role": "user", "content": "my secret is 4242"}])
        fork = store.fork(cid)
        fork_of_fork = store.fork(fork)
        other = store.fork(store.create())
        with pytest.raises(InvalidOperationError, match="2 fork"):
            store.erase(cid, reason="user asked")
        assert store.visible(cid).version == 2  # nothing erased
        done = store.erase(cid, reason="user asked", with_forks=True)
        assert done.forks == [fork, fork_of_fork]
        for gone in (cid, fork, fork_of_fork):
            with pytest.raises(ContextNotFoundError):
                store.visible(gone)
        records = {r.context_id: r for r in store.erasures()}
        assert records[cid].forks == [fork, fork_of_fork]
        assert records[fork].reason == f"erased with {cid}: user asked"
        assert store.visible(other).version >= 1  # another context's fork is untouched
        kept_source = store.create()
        store.insert(kept_source, [{"role": "user", "content": "x"}])
        kept = store.fork(kept_source)
        done = store.erase(kept_source, reason="r", with_forks=False)
        assert done.forks == [] and any(str(kept) in r for r in done.residue)
        assert store.visible(kept).messages[0].content == "x"


def test_erasing_the_newest_context_leaves_the_audit_index_consistent(tmp_path, caplog):
    """SQLite would give the next event the rowid after the newest left: the events written
    after the newest were erased take ids after the erased ones, so nothing says the index
    disagrees (no rebuild on the next open) and the events written next are audited."""
    import logging

    url = f"sqlite:///{tmp_path / 'e.db'}"
    with ContextStore.from_url(url) as store:
        kept = store.create(name="kept")
        store.insert(kept, {"role": "user", "content": "stays"})
        gone = store.create(name="gone")
        store.insert(gone, {"role": "user", "content": "erased"})
        store.audit(limit=1)  # the index has taken every event
        store.erase(gone, reason="the user asked")
    caplog.clear()
    with caplog.at_level(logging.WARNING), ContextStore.from_url(url) as store:
        later = store.create(name="later")
        store.insert(later, {"role": "user", "content": "after the erasure"})
        seen = [(str(e.context_id), e.version) for e in store.audit(limit=100).entries]
    assert not [r for r in caplog.records if "disagrees" in r.getMessage()]
    assert (str(later), 2) in seen and all(c != str(gone) for c, _ in seen)
    assert [v for c, v in seen if c == str(kept)] == [1, 2]


@pytest.mark.parametrize("awaited", [False, True])
def test_a_process_still_holding_an_erased_context_cannot_write_to_it(durable_url, awaited):
    """Another process erased the context while this one kept it in its cache: a read there
    must not serve the erased content, and an append must be refused (the context is
    gone), not stored on top of nothing, where it would bring erased content's context
    back as a damaged one."""
    import asyncio

    from ctxstore.adapters.store.async_store import AsyncContextStore

    with ContextStore.from_url(durable_url) as mine, ContextStore.from_url(durable_url) as other:
        cid = mine.create(name="erased elsewhere")
        mine.insert(cid, [{"role": "user", "content": "before"}])
        mine.visible(cid)  # cached here
        other.erase(cid, reason="the user asked")
        with pytest.raises(ContextNotFoundError):
            mine.visible(cid)  # (it served the erased content from its cache)
        if awaited:

            async def append() -> None:
                events = parts_of(mine).storage.async_events()
                try:
                    await AsyncContextStore(mine, events).insert(
                        cid, [{"role": "user", "content": SECRET}]
                    )
                finally:
                    events.discard()

            with pytest.raises(ContextNotFoundError):
                asyncio.run(append())
        else:
            with pytest.raises(ContextNotFoundError):
                mine.insert(cid, [{"role": "user", "content": SECRET}])
        with pytest.raises(ContextNotFoundError):
            other.visible(cid)
        assert SECRET.encode() not in raw_bytes(durable_url, other)
        assert other.verify().broken == []


@pytest.mark.parametrize(("awaited", "keyed"), [(False, False), (True, False), (False, True),
                                               (True, True)])  # fmt: skip
def test_a_process_holding_a_context_erased_and_made_again_appends_to_the_new_one(
    durable_url, awaited, keyed
):
    """Another process erased the context and made it again under its id, up to the same
    version, while this one kept the old one in its cache: this one's append lands on the
    new context, as it stands (it was stored on the old state, chained to the old chain
    and, with keys, sealed with the destroyed key: the new context failed verify, or could
    no longer be read at all)."""
    import asyncio

    from eventsourcing.cryptography import AESCipher
    from pydantic import SecretStr

    from ctxstore.adapters.store.async_store import AsyncContextStore

    settings = Settings(encryption_key=SecretStr(AESCipher.create_key(32)) if keyed else None)
    with (
        ContextStore.from_url(durable_url, settings) as mine,
        ContextStore.from_url(durable_url, settings) as other,
    ):
        cid = mine.create(name="made again elsewhere")
        for n in range(3):
            mine.insert(cid, [{"role": "user", "content": f"old {n}"}])
        version = mine.visible(cid).version
        other.erase(cid, reason="the user asked")
        other.create(context_id=cid, name="again")
        while other.visible(cid).version < version:
            other.insert(cid, [{"role": "user", "content": "new"}])
        late = {"role": "user", "content": "from the stale cache"}
        if awaited:

            async def append() -> None:
                events = parts_of(mine).storage.async_events()
                try:
                    await AsyncContextStore(mine, events).insert(cid, [late])
                finally:
                    events.discard()

            asyncio.run(append())
        else:
            mine.insert(cid, [late])
        seen = other.visible(cid)
        assert [m.content for m in seen.messages] == ["new"] * (version - 1) + [late["content"]]
        assert other.verify(cid).ok and other.verify().ok
        assert mine.visible(cid).messages == seen.messages


@pytest.mark.parametrize("again", [False, True])
def test_an_append_racing_an_erasure_is_refused_not_stored_on_nothing(
    store_url, monkeypatch, again
):
    """A writer read the context; then, before its append reached the recorder, the context
    was erased (by another thread: memory:// has no other process) and, `again`, made again
    under its id up to the same version. The recorder refuses the append (its previous
    version is gone, or the context's erasures are no longer those it was read under), and
    the writer's retry finds the context as it now stands: gone, or the new one."""
    with ContextStore.from_url(store_url) as store:
        cid = store.create(name="erased mid-append")
        store.insert(cid, [{"role": "user", "content": "old"}])
        recorder = parts_of(store).storage.recorder
        real = recorder.insert_events

        def erased_first(stored, **kwargs):
            monkeypatch.setattr(recorder, "insert_events", real)
            store.erase(cid, reason="the user asked")
            if again:
                store.create(context_id=cid, name="again")
                store.insert(cid, [{"role": "user", "content": "new"}])
            return real(stored, **kwargs)

        monkeypatch.setattr(recorder, "insert_events", erased_first)
        late = [{"role": "user", "content": "late"}]
        if again:
            store.insert(cid, late)
            assert [m.content for m in store.visible(cid).messages] == ["new", "late"]
        else:
            with pytest.raises(ContextNotFoundError):
                store.insert(cid, late)
            with pytest.raises(ContextNotFoundError):
                store.visible(cid)
        assert recorder.insert_events == real, "the erasure came before the append"
        assert store.verify().ok and store.verify().broken == []


def test_an_erasure_is_reported_done_when_only_its_cleanup_fails(durable_url, monkeypatch):
    """The deletion and its record commit together; a failure after that (the VACUUM or the
    log's checkpoint on a connection that died) leaves the erasure reported as done, its
    record naming the worst residue, never as a failure a caller would retry on a gone
    context."""
    from eventsourcing.persistence import OperationalError

    from ctxstore.adapters.storage.postgres import PostgresEraser
    from ctxstore.adapters.storage.sqlite import SQLiteEraser

    def dies(*args, **kwargs):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(PostgresEraser, "_vacuum", dies)
    monkeypatch.setattr(SQLiteEraser, "_checkpoint", dies)
    with ContextStore.from_url(durable_url) as store:
        cid = store.create(name="cleanup fails")
        store.insert(cid, [{"role": "user", "content": SECRET}])
        done = store.erase(cid, reason="the user asked")
        assert done.events == 2 and done.residue
        assert [e.context_id for e in store.erasures()] == [cid]
        assert store.erasures()[0].residue == done.residue
        with pytest.raises(ContextNotFoundError):
            store.visible(cid)


@pytest.mark.postgres
@pytest.mark.parametrize("ends_in_time", [False, True])
def test_an_erasure_names_the_transaction_holding_its_rows_or_waits_for_it(
    tmp_path, request, ends_in_time
):
    """A REPEATABLE READ transaction begun before an erasure (a long report) keeps the
    deleted rows as dead rows VACUUM cannot remove: the record names it (backend, state,
    age) unless it ends within the erasure's wait, after which the rows are vacuumed."""
    url = make_url("postgres", tmp_path, request)
    with ContextStore.from_url(url) as store:
        cid = store.create()
        store.insert(cid, {"role": "user", "content": "held by a report"})
        base = url.split("?")[0]
        report = psycopg.connect(base, autocommit=False)
        report.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        report.execute("SELECT 1").fetchall()  # its snapshot is taken
        pid = report.info.backend_pid
        if ends_in_time:
            threading.Timer(0.5, report.commit).start()
        try:
            record = store.erase(cid, reason="asked")
        finally:
            if not ends_in_time:
                report.rollback()
            report.close()
    held = [r for r in record.residue if "older than the erasure" in r]
    if ends_in_time:
        assert held == []
    else:
        assert len(held) == 1 and f"pid {pid}" in held[0] and "idle in transaction" in held[0]
