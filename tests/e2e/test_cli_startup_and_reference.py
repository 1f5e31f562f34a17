"""The command line builds only the command it runs (so a read loads neither the other
commands' modules nor the service, capture or PostgreSQL stacks), every command is filed
under one purpose, and the reference page lists each with its whole first sentence."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import typer.main

from ctxstore.adapters.cli.app import COMMANDS, GROUPS, PURPOSES, build_app

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "cli.md"
# Never needed by a read on a SQLite store: the HTTP service, the web view, MCP, capture
# and OpenTelemetry, PostgreSQL's driver, the HTTP client.
HEAVY = ("fastapi", "starlette", "uvicorn", "mcp", "opentelemetry", "psycopg", "httpx")


def loaded_by(argv: list[str], url: str) -> set[str]:
    """The modules a `ctxstore ...` run in a fresh process has imported when it ends."""
    probe = (
        "import sys\n"
        f"sys.argv = ['ctxstore', *{argv!r}]\n"
        "from ctxstore.adapters.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(' '.join(sys.modules), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True,
        env={"CTXSTORE_URL": url, "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    return set(done.stderr.split())


def test_a_read_command_loads_only_its_own_command_module_and_no_service_stack(tmp_path):
    url = f"sqlite:///{tmp_path / 'ctxstore.db'}"
    subprocess.run([sys.executable, "-m", "ctxstore", "--url", url, "create"], check=True,
                   capture_output=True)  # fmt: skip
    loaded = loaded_by(["contexts"], url)
    assert "ctxstore.adapters.store.facade" in loaded  # it did run
    commands = {m for m in loaded if m.startswith("ctxstore.adapters.cli.")}
    assert commands <= {f"ctxstore.adapters.cli.{m}" for m in
                        ("app", "common", "terminal", "commands")}, commands  # fmt: skip
    assert not {m for m in loaded if m.split(".")[0] in HEAVY}


def test_running_one_command_builds_that_one_alone():
    built = typer.main.get_command(build_app("show"))
    assert list(built.commands) == ["show"]
    everything = typer.main.get_command(build_app())
    assert len(everything.commands) == len(COMMANDS) + len(GROUPS)


def test_every_command_is_filed_under_exactly_one_purpose():
    filed = [name for names in PURPOSES.values() for name in names]
    commands = [name for _, name in (*COMMANDS, *GROUPS)]
    assert sorted(filed) == sorted(commands)  # each once, and nothing that is not one
    assert len(set(filed)) == len(filed)


def test_the_reference_groups_the_commands_each_with_an_example():
    page = PAGE.read_text(encoding="utf-8")
    headings = re.findall(r"^## (.+)$", page, flags=re.MULTILINE)
    assert headings == list(PURPOSES)
    sections = re.split(r"^## .+$", page, flags=re.MULTILINE)[1:]
    for purpose, section in zip(PURPOSES, sections, strict=True):
        example = re.search(
            r"^Example: [^\n]+\n\n```console\n(.*?)```", section, re.DOTALL | re.MULTILINE
        )
        assert example, f"{purpose}: no example"
        steps = [line for line in example.group(1).splitlines() if line.startswith("$ ")]
        ran = [line for line in example.group(1).splitlines() if not line.startswith("$ ")]
        assert steps and ran, f"{purpose}: an example shows commands and what they printed"
        for name in PURPOSES[purpose]:
            assert f"### `ctxstore {name}`" in section, f"{name} is not under {purpose}"


def test_no_summary_in_the_reference_is_cut_mid_sentence():
    page = PAGE.read_text(encoding="utf-8")
    rows = re.findall(r"^\| \[`[\w-]+`\]\(#[\w-]+\) \| (.+) \|$", page, flags=re.MULTILINE)
    listed = re.findall(r"^\* `[a-z][\w-]*`: (.+)$", page, flags=re.MULTILINE)  # groups' lists
    assert len(rows) == len(COMMANDS) + len(GROUPS)
    assert listed  # keys, token and retention list their commands
    cut = [s for s in rows + listed if not re.search(r"[.!?]\)?$", s) or s.endswith("...")]
    assert not cut, cut
