"""SQLite's commit durability (the setting sqlite_synchronous): full by default (a commit is
on the disk when it returns); normal commits to the write-ahead log, which a killed process
leaves whole — every acknowledged command is there when the file is opened again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ctxstore.adapters.settings import Settings, load_settings
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.domain.errors import ConfigurationError


def _synchronous(store: ContextStore) -> list[int]:
    """PRAGMA synchronous of the pool's connections (a writer's and a reader's)."""
    pool = store._storage.recorder.datastore.pool  # type: ignore[attr-defined]
    found = []
    for writer in (True, False):
        conn = pool.get_connection(is_writer=writer)
        try:
            found.append(int(conn._sqlite_conn.execute("PRAGMA synchronous").fetchone()[0]))
        finally:
            pool.put_connection(conn)
    return found


@pytest.mark.parametrize(("setting", "pragma"), [(None, 2), ("full", 2), ("normal", 1)])
def test_every_connection_commits_as_the_setting_says(
    tmp_path: Path, setting: str | None, pragma: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    if setting is not None:
        monkeypatch.setenv("CTXSTORE_SQLITE_SYNCHRONOUS", setting)
    with ContextStore.from_url(f"sqlite:///{tmp_path / 's.db'}", load_settings(actor="t")) as s:
        s.insert(s.create(name="c"), {"role": "user", "content": "hi"})
        assert _synchronous(s) == [pragma, pragma]


def test_an_unknown_value_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXSTORE_SQLITE_SYNCHRONOUS", "off")
    with pytest.raises(ConfigurationError, match="CTXSTORE_SQLITE_SYNCHRONOUS.*full.*normal"):
        load_settings()


WRITER = textwrap.dedent("""
    import os, sys
    from ctxstore.adapters.settings import Settings
    from ctxstore.adapters.store.facade import ContextStore
    store = ContextStore.from_url(sys.argv[1], Settings(actor="w", sqlite_synchronous="normal"))
    cid = store.create(name="killed")
    print(cid, flush=True)
    for n in range(int(sys.argv[2])):
        store.insert(cid, {"role": "user", "content": f"message {n}"})
        print(n, flush=True)  # acknowledged
    os.kill(os.getpid(), 9)  # no close, no checkpoint: the process dies as it stands
""")


def test_normal_keeps_every_acknowledged_command_of_a_killed_process(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'k.db'}"
    done = subprocess.run(
        [sys.executable, "-c", WRITER, url, "40"], capture_output=True, text=True, timeout=120,
        check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )  # fmt: skip
    assert done.returncode == -signal.SIGKILL, done.stderr
    lines = done.stdout.split()
    cid, acknowledged = lines[0], [int(n) for n in lines[1:]]
    assert acknowledged == list(range(40))
    with ContextStore.from_url(url, Settings(actor="t")) as store:
        contents = [m.content for m in store.visible(cid).messages]
        assert contents == [f"message {n}" for n in range(40)]
        assert store.verify(cid).ok
