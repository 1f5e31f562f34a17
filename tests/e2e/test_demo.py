"""`ctxstore demo`: a throwaway store unless --url names one, every step explained, and the
three commands it suggests at the end run on that store."""

import re
import shlex

from typer.testing import CliRunner

from ctxstore.adapters.cli.app import app


def test_the_demo_writes_a_throwaway_store_and_its_next_commands_run(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("CTXSTORE_DATA_DIR", str(tmp_path / "home"))
    monkeypatch.delenv("CTXSTORE_URL", raising=False)
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # TMPDIR is read again
    result = CliRunner().invoke(app, ["demo"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert not (tmp_path / "home").exists()  # the user's own store is untouched
    assert list((tmp_path / "tmp").glob("ctxstore-demo-*/demo.db"))
    for jargon in ("0-1-0", "half-window", "turn-boundary", "batch 1 holds"):
        assert jargon not in out
    assert out.count("\n# ") == 3
    went = re.search(r"went from (\d+) to (\d+) tokens", out)
    assert went and int(went[2]) < 0.8 * int(went[1])  # the compaction saves a real share
    commands = [line for line in out.splitlines() if line.startswith("ctxstore --url")]
    assert len(commands) == 3
    for command in commands:
        args = shlex.split(command)[1:]
        ran = CliRunner().invoke(app, [a for a in args if a != "--step"])
        assert ran.exit_code == 0, (command, ran.output)


def test_the_demo_writes_where_url_says(tmp_path):
    url = f"sqlite:///{tmp_path / 'mine.db'}"
    result = CliRunner().invoke(app, ["--url", url, "demo"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "mine.db").exists() and url in result.stdout
