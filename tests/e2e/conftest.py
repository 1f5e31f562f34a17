"""The command line on a fresh SQLite file, run in process (Typer's runner)."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from ctxstore.adapters.cli.app import app


@pytest.fixture
def cli(tmp_path) -> Any:
    """`cli(*args, input=, code=, actor=)` runs a command on the file and checks its exit
    code; `cli.url` and `cli.db` name the file."""
    runner = CliRunner()
    url = f"sqlite:///{tmp_path / 'cli.db'}"

    def run(*args: str, input: str | None = None, code: int = 0, actor: str = "cli-test") -> Any:
        result = runner.invoke(app, ["--url", url, "--actor", actor, *args], input=input)
        assert result.exit_code == code, (args, result.output, result.stderr)
        return result

    run.url = url  # type: ignore[attr-defined]
    run.db = tmp_path / "cli.db"  # type: ignore[attr-defined]
    return run
