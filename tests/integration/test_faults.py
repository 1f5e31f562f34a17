"""Failures of the database reach the caller typed: StoreUnavailableError with the cause,
one line and exit 5 on the command line, 503 with Retry-After over HTTP."""

import subprocess
import sys
import textwrap

import pytest
from typer.testing import CliRunner

from ctxstore.adapters.cli.app import app
from ctxstore.adapters.http.problems import for_error
from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.domain.errors import StoreUnavailableError


def user(text):
    return {"role": "user", "content": text}


def damage(path, at: float = 0.5) -> None:
    """Overwrite a run of pages in the middle of a SQLite file with garbage."""
    data = bytearray(path.read_bytes())
    start = int(len(data) * at) // 4096 * 4096
    data[start : start + 8192] = b"\xde\xad\xbe\xef" * 2048
    path.write_bytes(bytes(data))


def filled(tmp_path):
    db = tmp_path / "events.db"
    with ContextStore.from_url(f"sqlite:///{db}", Settings(actor="t")) as store:
        cid = store.create()
        for n in range(400):
            store.insert(cid, [user(f"message {n} " + "x" * 400)])
    return db, cid


def test_a_damaged_sqlite_file_gives_typed_errors(tmp_path):
    db, cid = filled(tmp_path)
    damage(db)
    match = "malformed|not a database|disk image"
    with (
        pytest.raises(StoreUnavailableError, match=match),
        ContextStore.from_url(f"sqlite:///{db}") as store,
    ):
        store._core.cache.drop(cid)
        store.history(cid)
        list(store.export_events(cid))
        store.verify()


def test_the_cli_says_one_line_and_exits_5_on_a_damaged_file(tmp_path):
    db, cid = filled(tmp_path)
    damage(db)
    result = CliRunner().invoke(app, ["--url", f"sqlite:///{db}", "log", str(cid)])
    assert result.exit_code == 5, result.output
    assert "Traceback" not in result.output + result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_full_disk_is_a_typed_error_and_writes_nothing(tmp_path):
    """The process may write files of at most 200 KB (RLIMIT_FSIZE): the store fills up."""
    script = textwrap.dedent(f"""
        import resource, signal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        from ctxstore.adapters.store.facade import ContextStore
        from ctxstore.domain.errors import StoreUnavailableError
        store = ContextStore.from_url("sqlite:///{tmp_path / "full.db"}")
        cid = store.create()
        hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
        resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, hard))
        written = 0
        try:
            for n in range(1000):
                store.insert(cid, [{{"role": "user", "content": "x" * 3000 + str(n)}}])
                written += 1
        except StoreUnavailableError as exc:
            resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
            store._core.cache.drop(cid)
            print("typed", written, store.visible(cid).version, str(exc)[:80])
    """)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    kind, written, version, *_ = done.stdout.split()
    assert kind == "typed" and int(version) == int(written) + 1  # nothing half-written


def test_http_answers_a_store_outage_503_with_retry_after():
    response = for_error(StoreUnavailableError("the store failed: OperationalError: gone"))
    assert response.status_code == 503 and response.headers["retry-after"] == "1"
