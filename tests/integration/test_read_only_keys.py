"""An encrypted SQLite store on read-only media opens with its key file read-only too: its
contexts read as they were written, and a write is refused as on any read-only store.

As root, file modes stop no write: the store's folder is reported unwritable (`os.access`,
which the store and its key file ask) and SQLite refuses every write on the read-only
connections it opens (tests/e2e/test_read_only_store.py does the same for a plain store)."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest
from eventsourcing.cryptography import AESCipher
from pydantic import SecretStr

from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.domain.errors import CtxStoreError

from ..conftest import as_reader

HELLO = {"role": "user", "content": "sealed before the media went read-only"}


def contents(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_an_encrypted_store_on_read_only_media_reads_and_refuses_writes(tmp_path, monkeypatch):
    settings = Settings(encryption_key=SecretStr(AESCipher.create_key(32)))
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with ContextStore.from_url(url, settings) as store:
        cid = store.create(name="sealed")
        store.insert(cid, [HELLO])
    assert (tmp_path / "store.db.keys").exists()
    before = contents(tmp_path)
    real = os.access

    def access(path, mode, *args, **kwargs):  # the folder (and so its files) is read-only
        if mode & os.W_OK and Path(path).resolve().parent in (tmp_path, tmp_path.parent):
            return False
        return real(path, mode, *args, **kwargs)

    monkeypatch.setattr(os, "access", access)
    with ContextStore.from_url(url, settings) as store:
        assert store.visible(cid).messages[0].text() == HELLO["content"]
        with pytest.raises(CtxStoreError, match="read-only|cannot be written"):
            store.insert(cid, [HELLO])
    assert contents(tmp_path) == before  # not a byte written


def test_an_encrypted_store_read_by_a_user_who_cannot_write_it(shared_folder):
    """For real: the command line run by a user who cannot write the folder (as root:
    nobody) shows a sealed context; before, opening the key file wrote to it and failed."""
    key = AESCipher.create_key(32)
    url = f"sqlite:///{shared_folder / 'store.db'}"
    with ContextStore.from_url(url, Settings(encryption_key=SecretStr(key))) as store:
        cid = str(store.create(name="sealed"))
        store.insert(cid, [HELLO])
    for path in shared_folder.iterdir():
        path.chmod(0o444)
    shared_folder.chmod(0o555)
    env = {"PATH": os.environ["PATH"], "HOME": str(shared_folder), "CTXSTORE_URL": url,
           "CTXSTORE_ENCRYPTION_KEY": key}  # fmt: skip
    env.update({k: v for k, v in os.environ.items() if k == "PYTHONPATH"})
    probe = "import ctxstore, os, sys; sys.exit(0 if not os.access(sys.argv[1], os.W_OK) else 3)"
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        pytest.skip("as root, without setpriv to run as another user")
    if as_reader("-c", probe, str(shared_folder), env=env).returncode != 0:
        pytest.skip("no user here that can run ctxstore but not write")
    shown = as_reader("-m", "ctxstore", "show", cid, env=env)
    assert shown.returncode == 0 and HELLO["content"] in shown.stdout, shown.stderr
