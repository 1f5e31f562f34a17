"""Large contexts on the command line: show and log take a slice; replay --json grows with
the history, not with history x context."""

import json

from typer.testing import CliRunner

from ctxstore.adapters.cli.app import app
from ctxstore.adapters.store.facade import ContextStore


def filled(tmp_path, name: str, n: int) -> tuple[str, str]:
    url = f"sqlite:///{tmp_path / name}"
    with ContextStore.from_url(url) as store:
        cid = store.create()
        for i in range(n):
            role = "user" if i % 2 == 0 else "assistant"
            store.insert(cid, {"role": role, "content": f"message number {i} " + "word " * 20})
    return url, str(cid)


def run(url: str, *args: str) -> str:
    result = CliRunner().invoke(app, ["--url", url, *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_show_and_log_take_a_slice(tmp_path):
    url, cid = filled(tmp_path, "a.db", 10)
    page = json.loads(run(url, "show", cid, "--json", "--limit", "3", "--offset", "4"))
    assert [m["content"].split()[2] for m in page["messages"]] == ["4", "5", "6"]
    assert page["total_messages"] == 10 and page["offset"] == 4
    table = run(url, "show", cid, "--limit", "2", "--offset", "8")
    assert "message number 8" in table and "message number 7" not in table
    assert "8..9 of 10" in table
    events = json.loads(run(url, "log", cid, "--json", "--limit", "2", "--offset", "1"))
    assert [e["version"] for e in events] == [2, 3]
    assert len(json.loads(run(url, "show", cid, "--json", "--openai", "--limit", "1"))) == 1


def test_replay_json_grows_linearly(tmp_path):
    sizes = {}
    for n in (60, 240):
        url, cid = filled(tmp_path, f"r{n}.db", n)
        out = run(url, "replay", cid, "--json")
        lines = [json.loads(line) for line in out.splitlines()]
        assert len(lines) == n + 1
        assert lines[-1]["added"][0]["at"] == n - 1 and lines[-1]["visible"]["messages"] == n
        sizes[n] = len(out)
    assert sizes[240] / sizes[60] < 6  # 4x the history: ~4x the output (quadratic: ~16x)
    full = run(url, "replay", cid, "--json", "--full", "--from", str(n), "--to", str(n + 1))
    assert len(json.loads(full.splitlines()[-1])["visible"]["messages"]) == n
