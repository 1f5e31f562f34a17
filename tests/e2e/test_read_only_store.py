"""A SQLite store whose file or folder cannot be written (read-only media, a copy kept
without write rights) is read as it is, and a write on it says why it is refused.

As root, file modes stop no write, so two kinds of test: in this process the store's file
or folder is reported unwritable (`os.access`, which the store asks) and SQLite itself
refuses every write on the read-only connection (`mode=ro`, `immutable=1`) whoever runs
it; and, where the machine allows, the command line as a user that really cannot write
the store's folder (root drops to `nobody`)."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

import ctxstore
from ctxstore.adapters.cli.app import app
from ctxstore.adapters.storage.sqlite_pool import read_only_uri

from ..conftest import as_reader

HELLO = {"role": "user", "content": "hello from before"}


def make_store(folder: Path) -> tuple[str, str]:
    """A store with one context in `folder`, closed; its URL and the context's id."""
    url = f"sqlite:///{folder / 'store.db'}"
    with ctxstore.open(url) as store:
        cid = store.create(name="kept")
        store.insert(cid, [HELLO])
        store.audit()  # its indexes current, as a store in use has them
    return url, str(cid)


def unwritable(monkeypatch, *paths: Path) -> None:
    """`os.access` says `paths` cannot be written (as it would for another user)."""
    real = os.access
    blocked = {str(p) for p in paths}

    def access(path, mode, *args, **kwargs):
        if mode & os.W_OK and str(path) in blocked:
            return False
        return real(path, mode, *args, **kwargs)

    monkeypatch.setattr(os, "access", access)


def contents(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


CASES = {
    "folder": ("its folder", lambda db: [db.parent]),
    "file": ("the file store.db is not writable", lambda db: [db]),
    "both": ("neither the file store.db nor its folder", lambda db: [db, db.parent]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_store_that_cannot_be_written_is_read_and_refuses_writes_saying_why(
    case, tmp_path, monkeypatch
):
    url, cid = make_store(tmp_path)
    db = tmp_path / "store.db"
    said, blocked = CASES[case]
    unwritable(monkeypatch, *blocked(db))
    before = contents(tmp_path)
    with ctxstore.open(url) as store:
        assert [m.content for m in store.visible(cid).messages] == [HELLO["content"]]
        assert [c.name for c in store.contexts()] == ["kept"]
        with pytest.raises(ctxstore.StoreUnavailableError) as refused:
            store.insert(cid, [{"role": "user", "content": "not kept"}])
        with pytest.raises(ctxstore.StoreUnavailableError):
            store.create(name="not made")
        assert [m.content for m in store.visible(cid).messages] == [HELLO["content"]]
    assert "read-only" in str(refused.value) and said in str(refused.value), refused.value
    if case != "file":  # (SQLite keeps a reader's log index beside a file it may not write)
        assert contents(tmp_path) == before  # not a byte written


def test_the_command_line_reads_and_refuses_a_write_in_one_line(tmp_path, monkeypatch):
    url, cid = make_store(tmp_path)
    unwritable(monkeypatch, tmp_path)
    runner = CliRunner()
    for command in (["contexts"], ["show", cid], ["diff", cid, "1", "2"], ["audit"]):
        done = runner.invoke(app, ["--url", url, *command])
        assert done.exit_code == 0, (command, done.output)
    assert "hello from before" in runner.invoke(app, ["--url", url, "show", cid]).stdout
    refused = runner.invoke(app, ["--url", url, "insert", cid, "--content", "not kept"])
    assert refused.exit_code not in (0, 1), refused.output  # (1: an uncaught exception)
    assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.output
    assert "read-only" in refused.stderr and f"its folder {tmp_path}" in refused.stderr


def test_a_copy_taken_while_the_store_was_open_reads_its_log_too(tmp_path, monkeypatch):
    """A copy with its write-ahead log (-wal, -shm) beside it: what only the log holds is
    read as well (a read that took the file as it stands would miss it)."""
    origin, copy = tmp_path / "origin", tmp_path / "copy"
    origin.mkdir()
    with ctxstore.open(f"sqlite:///{origin / 'store.db'}") as store:
        cid = store.create(name="open")
        store.insert(cid, [HELLO])
        assert (origin / "store.db-wal").exists()
        shutil.copytree(origin, copy, ignore=shutil.ignore_patterns("*-turns"))
    unwritable(monkeypatch, copy)
    assert read_only_uri(str(copy / "store.db")).endswith("?mode=ro")
    with ctxstore.open(f"sqlite:///{copy / 'store.db'}") as store:
        assert [m.content for m in store.visible(cid).messages] == [HELLO["content"]]


def test_the_uri_reads_a_file_as_it_stands_only_where_no_log_can_be(tmp_path, monkeypatch):
    db = tmp_path / "my store?.db"
    db.write_bytes(b"")
    assert read_only_uri(str(db)) == f"file:{tmp_path}/my%20store%3F.db?mode=ro"
    unwritable(monkeypatch, tmp_path)
    assert read_only_uri(str(db)).endswith("?immutable=1")
    (tmp_path / "my store?.db-wal").write_bytes(b"")
    assert read_only_uri(str(db)).endswith("?mode=ro")


def test_a_writable_store_opens_as_before(tmp_path):
    url, cid = make_store(tmp_path)
    with ctxstore.open(url) as store:
        store.insert(cid, [{"role": "user", "content": "kept"}])
        assert len(store.visible(cid).messages) == 2


# ---- for real: a user who cannot write the folder ------------------------------------------


def test_the_command_line_as_a_user_who_cannot_write_the_store(shared_folder):
    url, cid = make_store(shared_folder)
    for path in shared_folder.iterdir():
        path.chmod(0o444)
    shared_folder.chmod(0o555)
    env = {"PATH": os.environ["PATH"], "HOME": str(shared_folder), "CTXSTORE_URL": url}
    env.update({k: v for k, v in os.environ.items() if k == "PYTHONPATH"})
    probe = "import ctxstore, os, sys; sys.exit(0 if not os.access(sys.argv[1], os.W_OK) else 3)"
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        pytest.skip("as root, without setpriv to run as another user")
    checked = as_reader("-c", probe, str(shared_folder), env=env)
    if checked.returncode != 0:
        pytest.skip(f"no user here that can run ctxstore but not write: {checked.stderr[-300:]}")
    listed = as_reader("-m", "ctxstore", "contexts", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    assert cid in listed.stdout
    shown = as_reader("-m", "ctxstore", "show", cid, env=env)
    assert shown.returncode == 0 and "hello from before" in shown.stdout, shown.stderr
    refused = as_reader("-m", "ctxstore", "insert", cid, "--content", "not kept", env=env)
    assert refused.returncode != 0 and refused.stderr.count("\n") == 1, refused.stderr
    assert "read-only" in refused.stderr and "nor its folder" in refused.stderr
