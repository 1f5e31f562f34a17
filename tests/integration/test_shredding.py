"""Erasure by destroying the key (crypto-shredding): after `erase`, nothing of the context
opens from any copy made before — the store's files, its write-ahead log, a backup, a
PostgreSQL base backup restored and started — read with the store's own KEK. Other
contexts in the same copies still read and verify."""

from __future__ import annotations

import base64
import hashlib
import shutil
import sqlite3
import sys
from pathlib import Path

import psycopg
import pytest
from eventsourcing.cryptography import AESCipher
from pydantic import SecretStr

from ctxstore import DamagedContextError
from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.domain.errors import BlobNotFoundError

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import pg_cluster

SECRET = "ERASE-ME-4b1c 机密"
KEPT = "KEEP-ME-9e0a"


def _write(store: ContextStore) -> tuple[str, str]:
    gone = store.create(name="to erase")
    kept = store.create(name="to keep")
    for n in range(12):  # past the snapshot interval: snapshots hold it too
        store.insert(gone, [{"role": "user", "content": f"{SECRET} {n}"}])
        store.insert(kept, [{"role": "user", "content": f"{KEPT} {n}"}])
    return str(gone), str(kept)


def _files(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in folder.rglob("*") if p.is_file())


def _check_copy(url: str, settings: Settings, gone: str, kept: str) -> None:
    with ContextStore.from_url(url, settings) as copy:
        with pytest.raises(DamagedContextError, match="not in the vault"):
            copy.visible(gone)
        assert copy.visible(kept).messages[-1].text() == f"{KEPT} 11"
        assert copy.verify(kept).ok
        found = copy.verify()  # the erased context's states are reported unreadable
        assert {b.context_id.hex for b in found.broken} <= {gone.replace("-", "")}


def test_sqlite_erasure_leaves_nothing_readable_in_any_copy(tmp_path):
    settings = Settings(encryption_key=SecretStr(AESCipher.create_key(32)), snapshot_interval=4)
    url = f"sqlite:///{tmp_path / 's.db'}"
    with ContextStore.from_url(url, settings) as store:
        gone, kept = _write(store)
        vault = store._core.storage.keys.keys.vault
        wrapped = [r[3] for r in vault.rows(gone.replace("-", ""))]
        assert wrapped
        # Copies made before the erasure: SQLite's online backup, and the raw files.
        with sqlite3.connect(tmp_path / "s.db") as src, sqlite3.connect(tmp_path / "b.db") as dst:
            src.backup(dst)
        (tmp_path / "raw").mkdir()
        for p in tmp_path.glob("s.db*"):
            if not p.name.startswith("s.db.keys"):
                shutil.copy(p, tmp_path / "raw" / p.name)
        record = store.erase(gone, reason="asked")
        assert "crypto-shredded" in record.residue[0]
    everything = _files(tmp_path)
    assert SECRET.encode() not in everything and b"ERASE-ME" not in everything
    keys_file = b"".join(p.read_bytes() for p in tmp_path.glob("s.db.keys*"))
    for w in wrapped:
        assert w not in keys_file  # the wrapped key is gone from the vault's file and log
    apart = settings.model_copy(update={"key_vault": url + ".keys"})
    _check_copy(f"sqlite:///{tmp_path / 'b.db'}", apart, gone, kept)
    _check_copy(f"sqlite:///{tmp_path / 'raw' / 's.db'}", apart, gone, kept)


@pytest.mark.postgres
def test_postgres_erasure_leaves_nothing_readable_in_a_base_backup(tmp_path, request):
    if not pg_cluster.available():
        pytest.skip("PostgreSQL 15's initdb, pg_ctl and pg_basebackup are not installed")
    from tests.conftest import make_url

    vault_url = make_url("postgres", tmp_path, request)  # the shared server: a vault apart
    settings = Settings(
        encryption_key=SecretStr(AESCipher.create_key(32)), snapshot_interval=4,
        key_vault=vault_url,
    )  # fmt: skip
    with (
        pg_cluster.private_cluster() as primary,
        ContextStore.from_url(primary.url, settings) as store,
    ):
        gone, kept = _write(store)
        backup = primary.base_backup(pg_cluster.private_folder())
        try:
            record = store.erase(gone, reason="asked")
            assert "crypto-shredded" in record.residue[0]
            assert store.visible(kept).messages[-1].text() == f"{KEPT} 11"
            with psycopg.connect(primary.url, autocommit=True) as conn:
                conn.execute("CHECKPOINT")  # the erasure reaches the table files
            for folder in (primary.data, backup.data):  # table files and WAL alike
                data = _files(folder)
                assert b"ERASE-ME" not in data and b"KEEP-ME" not in data
            backup.start()
            _check_copy(backup.url, settings, gone, kept)
        finally:
            if (backup.data / "postmaster.pid").exists():
                backup.stop()
            shutil.rmtree(backup.data.parent, ignore_errors=True)


def _image_message(data: bytes) -> dict:
    url = "data:image/png;base64," + base64.b64encode(data).decode()
    return {"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}


def test_attachments_are_shredded_with_the_contexts_that_held_them(tmp_path):
    from .test_attachments import png

    settings = Settings(encryption_key=SecretStr(AESCipher.create_key(32)))
    url = f"sqlite:///{tmp_path / 's.db'}"
    own, shared, upload = png(40, 30), png(41, 30), png(42, 30)
    with ContextStore.from_url(url, settings) as store:
        gone = store.create(name="gone")
        kept = store.create(name="kept")
        store.insert(gone, [_image_message(own), _image_message(shared)])
        store.insert(kept, [_image_message(shared)])
        uploaded = store.put_blob(upload, "image/png")
        shas = {n: hashlib.sha256(d).hexdigest() for n, d in
                (("own", own), ("shared", shared), ("upload", upload))}  # fmt: skip
        assert store.blob(shas["own"]).data == own
        with sqlite3.connect(tmp_path / "s.db") as src, sqlite3.connect(tmp_path / "b.db") as dst:
            src.backup(dst)
        store.erase(gone, reason="asked")
        assert store.blob(shas["shared"]).data == shared  # still the kept context's
        assert store.blob(uploaded.sha256).data == upload
    everything = _files(tmp_path)
    for data in (own, shared, upload):
        assert data[-200:] not in everything  # sealed wherever they are
    apart = settings.model_copy(update={"key_vault": url + ".keys"})
    with ContextStore.from_url(f"sqlite:///{tmp_path / 'b.db'}", apart) as copy:
        with pytest.raises(BlobNotFoundError):
            copy.blob(shas["own"])  # in the backup, but only the erased context held its key
        assert copy.blob(shas["shared"]).data == shared
        assert copy.blob(shas["upload"]).data == upload


def test_the_first_key_says_where_keys_live_and_what_a_backup_needs(durable_url, caplog):
    """Once: when a store's vault gets its first key. Beside SQLite the vault is a file a
    backup needs; in PostgreSQL's own database, backups keep erased keys until rotation."""
    key = SecretStr(AESCipher.create_key(32))
    with caplog.at_level("WARNING", logger="ctxstore.adapters.keys.cipher"):
        with ContextStore.from_url(durable_url, Settings(encryption_key=key)) as store:
            store.create()
            store.create()
        with ContextStore.from_url(durable_url, Settings(encryption_key=key)) as store:
            store.create()
    said = [r.getMessage() for r in caplog.records if "data keys are kept in" in r.getMessage()]
    assert len(said) == 1, said
    if durable_url.startswith("sqlite"):
        assert ".keys: back it up with the store" in said[0]
    else:
        assert "until the KEK is rotated" in said[0] and "CTXSTORE_KEY_VAULT" in said[0]
