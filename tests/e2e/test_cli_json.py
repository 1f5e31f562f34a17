"""--json on every command that writes or prints something: a script reads JSON, and a
refusal under --json is JSON too."""

from __future__ import annotations

import base64
import json

from typer.testing import CliRunner

from ctxstore.adapters.cli.app import app


def test_export_says_what_it_wrote_as_json(cli, tmp_path):
    cid = cli("create").stdout.strip()
    cli("insert", cid, "--content", "hello")
    target = tmp_path / "out.jsonl"
    said = json.loads(cli("export", cid, "-o", str(target), "--json").stdout)
    assert said == {"context": cid, "output": str(target), "lines": 3}
    assert len(target.read_text().splitlines()) == 3
    lines = cli("export", cid, "--json").stdout.splitlines()  # the lines are JSON already
    assert len(lines) == 3 and all(isinstance(json.loads(line), dict) for line in lines)


def test_keygen_as_json_and_a_bad_size_refused_with_its_code(cli):
    key = json.loads(cli("keygen", "--json").stdout)
    assert key["size"] == 32 and len(base64.b64decode(key["key"])) == 32
    refused = cli("keygen", "--size", "7", "--json", code=1)
    assert json.loads(refused.stderr)["error"] == "InvalidOperationError"
    assert "--size must be 16, 24 or 32" in cli("keygen", "--size", "7", code=1).stderr


def test_the_demo_as_json_names_its_store_contexts_and_commands(tmp_path):
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    result = CliRunner().invoke(app, ["--url", url, "demo", "--json"])
    assert result.exit_code == 0, result.output
    done = json.loads(result.stdout)
    assert done["url"] == url and len(done["commands"]) == 3
    assert set(done["contexts"]) >= {"demo: travel agent", "demo: compaction", "demo: what if"}


def test_every_command_but_serve_takes_json():
    """The README promises --json on every command; `serve` runs until stopped."""
    import typer.main

    def leaves(command, prefix=""):
        subs = getattr(command, "commands", None)
        if not subs:
            yield prefix.strip(), command
            return
        for name, sub in subs.items():
            yield from leaves(sub, f"{prefix} {name}")

    lacking = [
        name
        for name, command in leaves(typer.main.get_command(app))
        if "--json" not in {o for p in command.params for o in getattr(p, "opts", [])}
    ]
    assert lacking == ["serve"]
