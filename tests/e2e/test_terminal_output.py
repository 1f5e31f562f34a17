"""Stored text never drives the operator's terminal: control characters, carriage returns,
C1 controls and bidirectional overrides are shown as escapes in every human-readable output,
and JSON output holds none raw (the same JSON values)."""

import json

import pytest
from typer.testing import CliRunner

from ctxstore.adapters.cli.app import app
from ctxstore.adapters.store.facade import ContextStore

HOSTILE = "hi\x1b]0;pwned\x07\x1b[2Jthere\rX\u009b2J \u202eevil\u202c end"
RAW = ["\x1b", "\x07", "\r", "\u009b", "\u202e"]


@pytest.fixture
def hostile(tmp_path):
    url = f"sqlite:///{tmp_path / 't.db'}"
    with ContextStore.from_url(url) as store:
        cid = store.create(name="name\x1b[31m")
        store.insert(cid, {"role": "user", "content": HOSTILE, "name": "bob\x1b[1m"})
        store.insert(cid, {"role": "assistant", "content": "ok"})
    return url, str(cid)


@pytest.mark.parametrize(
    "args",
    [
        ["show"],
        ["log", "--changes"],
        ["diff", None, "1", "3"],
        ["replay"],
        ["contexts"],
        ["show", "--json"],
        ["replay", "--json"],
        ["log", "--json"],
    ],
)
def test_no_control_character_reaches_the_terminal(hostile, args):
    url, cid = hostile
    argv = [a if a is not None else cid for a in args]
    if argv[0] not in ("contexts", "diff"):
        argv.insert(1, cid)
    elif argv[0] == "diff":
        argv[1] = cid
    result = CliRunner().invoke(app, ["--url", url, *argv])
    assert result.exit_code == 0, result.output
    for raw in RAW:
        assert raw not in result.stdout, (argv, raw)
    if "--json" in argv and argv[0] == "show":
        shown = json.loads(result.stdout)["messages"][0]
        assert shown["content"] == HOSTILE  # the same value, escaped
    elif "--json" not in argv and argv[0] != "contexts":
        assert "\\x1b]0;pwned" in result.stdout
