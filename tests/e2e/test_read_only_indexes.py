"""Audit and search on a SQLite store that can only be read: with their indexes current
they answer (reading writes nothing); with an index behind the events they refuse with
IndexBehindError, which says so and why the store is read-only, instead of failing on the
catch-up's write or answering without what the index lacks."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

import ctxstore
from ctxstore.adapters.cli.app import app
from ctxstore.domain.errors import IndexBehindError


def make_store(folder: Path, *, behind: bool) -> tuple[str, str]:
    url = f"sqlite:///{folder / 'store.db'}"
    with ctxstore.open(url) as store:
        cid = store.create(name="kept")
        store.insert(cid, [{"role": "user", "content": "hello walnut"}])
        store.search("walnut")  # both indexes current
        if behind:
            store.insert(cid, [{"role": "user", "content": "walnut written after"}])
    return url, str(cid)


def unwritable(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    real = os.access

    def access(path, mode, *args, **kwargs):
        if mode & os.W_OK and str(path) == str(folder):
            return False
        return real(path, mode, *args, **kwargs)

    monkeypatch.setattr(os, "access", access)


def contents(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_current_indexes_answer_on_a_read_only_store(tmp_path, monkeypatch):
    url, _ = make_store(tmp_path, behind=False)
    unwritable(monkeypatch, tmp_path)
    before = contents(tmp_path)
    with ctxstore.open(url) as store:
        assert [e.version for e in store.audit().entries] == [1, 2]
        assert [h.snippet for h in store.search("walnut").hits] == ["hello «walnut»"]
    assert contents(tmp_path) == before


def test_an_index_behind_on_a_read_only_store_is_refused_saying_why(tmp_path, monkeypatch):
    url, cid = make_store(tmp_path, behind=True)
    unwritable(monkeypatch, tmp_path)
    before = contents(tmp_path)
    with ctxstore.open(url) as store:
        for read in (store.audit, lambda: store.search("walnut")):
            with pytest.raises(IndexBehindError) as refused:
                read()
            said = str(refused.value)
            assert "behind" in said and "read-only" in said and str(tmp_path) in said, said
        assert len(store.visible(cid).messages) == 2  # the events themselves are read
    assert contents(tmp_path) == before
    done = CliRunner().invoke(app, ["--url", url, "audit"])
    assert done.exit_code not in (0, 1), done.output  # (1: an uncaught exception)
    assert "Traceback" not in done.output and "behind" in done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
