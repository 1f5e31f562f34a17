"""Keys per context: envelope encryption, the audit index without user text, stores
encrypted before keys per context, and KEK rotation (docs/explanation/security.md)."""

from __future__ import annotations

import base64
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from eventsourcing.cryptography import AESCipher
from pydantic import SecretStr

from ctxstore import DamagedContextError, StoreUnavailableError
from ctxstore.adapters.keys.cipher import MAGIC, ContextCipher, DataKeys, KeyDestroyedError
from ctxstore.adapters.keys.kek import LocalKeyring
from ctxstore.adapters.keys.vault import MemoryVault
from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore

from .test_at_rest import raw_bytes

SECRET = "SECRET-7d2f"


def key() -> str:
    return AESCipher.create_key(32)


def keyed(**extra) -> Settings:
    return Settings(encryption_key=SecretStr(key()), snapshot_interval=4, **extra)


def test_each_context_seals_with_its_own_key_bound_to_it():
    keys = DataKeys(LocalKeyring([AESGCM.generate_key(256)]), MemoryVault())
    cipher = ContextCipher(keys)
    from uuid import uuid4

    a, b = uuid4(), uuid4()
    sealed = cipher.encrypt(a, b"hello")
    assert sealed.startswith(MAGIC)
    assert cipher.decrypt(a, sealed) == b"hello"
    cipher.encrypt(b, b"x")
    assert keys.generations(a.hex)[1] != keys.generations(b.hex)[1]
    with pytest.raises(ValueError, match="moved from another context|damaged"):
        cipher.decrypt(b, sealed)  # a's state put in b's place does not open
    keys.destroy([a.hex])
    with pytest.raises(KeyDestroyedError):
        cipher.decrypt(a, sealed)


def test_every_stored_state_is_sealed_per_context(durable_url):
    settings = keyed()
    with ContextStore.from_url(durable_url, settings) as store:
        cids = [store.create(name=f"c{i}") for i in range(3)]
        for cid in cids:
            for n in range(6):  # past the snapshot interval
                store.insert(cid, [{"role": "user", "content": f"{SECRET} {n}"}])
        storage = store._core.storage
        for cid in cids:
            for s in storage.recorder.select_events(cid):
                assert bytes(s.state).startswith(MAGIC)
        names = {n for n in _vault_names(storage.keys)}
        assert {c.hex for c in cids} <= names
        assert store.verify().ok
    with ContextStore.from_url(durable_url, settings) as store:  # cold: keys unwrapped again
        assert store.visible(cids[1]).messages[-1].text() == f"{SECRET} 5"


def _vault_names(cipher) -> list[str]:
    return [r[0] for r in cipher.keys.vault.not_wrapped_by("none", ("", 0), 10**6)]


def test_the_audit_index_holds_no_user_text_and_filters_as_before(durable_url):
    settings = keyed()
    with ContextStore.from_url(durable_url, settings) as store:
        cid = store.create(name=f"name-{SECRET}", metadata={"m": f"meta-{SECRET}"},
                           actor=f"alice-{SECRET}")  # fmt: skip
        store.insert(cid, [{"role": "user", "content": "hi"}], actor=f"alice-{SECRET}")
        store.insert(cid, [{"role": "user", "content": "yo"}], actor="bob")
        store.record_usage(cid, model=f"model-{SECRET}", prompt_tokens=3)
        page = store.audit(actor=f"alice-{SECRET}")
        assert [e.version for e in page.entries] == [1, 2]
        assert {e.actor for e in page.entries} == {f"alice-{SECRET}"}
        assert [e.version for e in store.audit(actor="bob").entries] == [3]
        assert store.audit(actor="nobody").entries == []
        everything = store.audit(context_id=cid).entries
        assert f"name-{SECRET}" in str(everything[0].model_dump())
    data = raw_bytes(durable_url, store)
    for secret in (SECRET, "alice"):
        assert secret.encode() not in data, secret


def test_a_store_encrypted_with_one_key_before_keys_per_context_still_reads(tmp_path):
    url = f"sqlite:///{tmp_path / 'old.db'}"
    k = key()
    with ContextStore.from_url(url, Settings(snapshot_interval=4)) as store:
        cid = store.create(name="old")
        for n in range(6):
            store.insert(cid, [{"role": "user", "content": f"{SECRET} {n}"}], actor="carol")
    # As the library's AESCipher wrote every state under the one key: nonce, tag, body.
    old = AESCipher.__new__(AESCipher)
    old.key = base64.b64decode(k)
    with sqlite3.connect(tmp_path / "old.db") as db:
        for table in ("stored_events", "stored_snapshots"):
            rows = db.execute(
                f"SELECT originator_id, originator_version, state FROM {table}"
            ).fetchall()
            db.executemany(
                f"UPDATE {table} SET state = ? WHERE originator_id = ? AND originator_version = ?",
                [(old.encrypt(bytes(s)), i, v) for i, v, s in rows],
            )
    settings = Settings(encryption_key=SecretStr(k), snapshot_interval=4)
    with ContextStore.from_url(url, settings) as store:
        assert store.visible(cid).messages[-1].text() == f"{SECRET} 5"
        store.insert(cid, [{"role": "user", "content": "new"}], actor="carol")
        assert store.verify().ok
        assert [e.version for e in store.audit(actor="carol").entries] == list(range(2, 9))
        newest = store._core.storage.recorder.select_events(cid, desc=True, limit=1)[0]
        assert bytes(newest.state).startswith(MAGIC)
    with sqlite3.connect(tmp_path / "old.db") as db:  # the index was rebuilt sealed
        rows = db.execute("SELECT actor, facts, tenant FROM ctxstore_audit").fetchall()
    assert len(rows) == 8 and "carol" not in str(rows)
    with pytest.raises(StoreUnavailableError, match="CTXSTORE_ENCRYPTION_KEY"):
        ContextStore.from_url(url, Settings(encryption_key=SecretStr(key())))


def _key_file(path: Path, *keys: str) -> Path:
    path.write_text("# current first\n" + "\n".join(keys) + "\n")
    return path


def test_kek_rotation_rewraps_every_key_online_and_resumes(durable_url, tmp_path):
    k1, k2 = key(), key()
    one = Settings(key_file=_key_file(tmp_path / "k1", k1), snapshot_interval=4)
    with ContextStore.from_url(durable_url, one) as store:
        cids = [store.create(name=f"c{i}") for i in range(30)]
        for cid in cids:
            store.insert(cid, [{"role": "user", "content": SECRET}])
    both = Settings(key_file=_key_file(tmp_path / "k21", k2, k1), snapshot_interval=4)
    from ctxstore.adapters.keys.rotation import rotate_kek

    with ContextStore.from_url(durable_url, both) as store:
        keys = store._core.storage.keys.keys
        first = rotate_kek(keys, batch=10, max_batches=1)  # interrupted after one batch
        assert first.rewrapped == 10 and not first.done
        stop = threading.Event()
        written: list[int] = []

        def writer() -> None:  # writes go on while the rest is re-wrapped
            fresh = ContextStore.from_url(durable_url, both)
            try:
                while not stop.is_set():
                    c = fresh.create(name="during")
                    written.append(fresh.insert(c, [{"role": "user", "content": "x"}]).version)
                    fresh.insert(cids[len(written) % 30], [{"role": "user", "content": "y"}])
            finally:
                fresh.close()

        thread = threading.Thread(target=writer)
        thread.start()
        while not written and thread.is_alive():
            stop.wait(0.01)
        try:
            rest = store.admin.rotate_kek(batch=7)
        finally:
            stop.set()
            thread.join()
        assert rest.done and not rest.unopened
        assert written
    only_new = Settings(key_file=_key_file(tmp_path / "k2", k2), snapshot_interval=4)
    with ContextStore.from_url(durable_url, only_new) as store:
        status = store.admin.key_status()
        assert set(status.by_kek) == {status.kek}
        for cid in cids:
            assert store.visible(cid).messages[0].text() == SECRET
        assert store.verify().ok
    only_old = Settings(key_file=_key_file(tmp_path / "k1b", k1), snapshot_interval=4)
    with pytest.raises(StoreUnavailableError):
        ContextStore.from_url(durable_url, only_old)


def test_another_vault_or_a_destroyed_key_fails_typed(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    settings = keyed()
    with ContextStore.from_url(url, settings) as store:
        cid = store.create(name="x")
        store.insert(cid, [{"role": "user", "content": SECRET}])
    (tmp_path / "s.db.keys").rename(tmp_path / "elsewhere.keys")
    with (
        pytest.raises((StoreUnavailableError, DamagedContextError)),
        ContextStore.from_url(url, settings) as store,
    ):
        store.visible(cid)


def test_the_async_store_seals_reads_and_expires_with_keys(durable_url):
    import asyncio

    from ctxstore import ContextNotFoundError
    from ctxstore.adapters.store.async_store import AsyncContextStore

    settings = keyed()

    async def main() -> Any:
        store = await AsyncContextStore.open(durable_url, settings)
        try:
            cid = await store.create(name="a")
            for n in range(6):
                await store.insert(cid, [{"role": "user", "content": f"{SECRET} {n}"}])
        finally:
            await store.close()
        cold = await AsyncContextStore.open(durable_url, settings)  # no key cached
        try:
            await cold.insert(cid, [{"role": "user", "content": "again"}])
            seen = [e.version async for e in cold.follow(cid, after=5, idle=0.2)]
            assert seen == [6, 7, 8]
            assert (await cold.visible(cid)).messages[-2].text() == f"{SECRET} 5"
            cold._core.retention.set(f"context:{cid.hex}", 1, None, "t")
            cold._core.retention.clock = lambda: time.time() + 5
            with pytest.raises(ContextNotFoundError, match="expired"):
                await cold.insert(cid, [{"role": "user", "content": "late"}])
        finally:
            await cold.close()
        return cid

    # (by its id: a listing hides the context its 1 s policy expired, as a loaded run shows)
    cid = asyncio.run(main())
    with ContextStore.from_url(durable_url, settings) as store:
        storage = store._core.storage
        assert all(bytes(s.state).startswith(MAGIC) for s in storage.recorder.select_events(cid))
        assert store.verify().ok
