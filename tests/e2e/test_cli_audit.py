"""Audit and debugging through the command line on a SQLite file."""

import json
import sqlite3

from typer.testing import CliRunner

from ctxstore.adapters.cli.app import app


def session(cli):
    cid = cli("create", "--name", "demo").stdout.strip()
    cli("insert", cid, "--content", "hello", actor="alice")
    cli("batch-start", cid, actor="bob")
    cli("insert", cid, "--content", "temporary", actor="bob")
    cli("batch-end", cid, "--to", "0", actor="bob")
    cli("usage", cid, "--model", "gpt-4o", "--prompt-tokens", "9")
    return cid


def test_audit_follows_with_a_cursor(cli):
    cid = session(cli)
    lines = cli("audit", "--by", "bob", "--json").stdout.splitlines()
    events = [json.loads(x) for x in lines[:-1]]
    assert [(e["type"], e["reverted"]) for e in events] == [
        ("batch_start", True), ("insert", True), ("batch_end", False),
    ]  # fmt: skip
    assert json.loads(lines[-1]) == {"cursor": events[-1]["position"], "more": False}
    first = cli("audit", "--limit", "2", "--json").stdout.splitlines()
    cursor = json.loads(first[-1])
    assert cursor["more"] and [json.loads(x)["version"] for x in first[:-1]] == [1, 2]
    rest = cli("audit", "--after", str(cursor["cursor"]), "--json").stdout.splitlines()
    assert [json.loads(x)["version"] for x in rest[:-1]] == [3, 4, 5, 6]
    assert "batch_start" in cli("audit", "--since", "1h", "--context", cid).stdout
    cli("audit", "--since", "yesterday", code=1)
    cli("audit", "--type", "nope", code=1)


def test_replay_diff_show_call_and_log(cli):
    cid = session(cli)
    steps = [json.loads(x) for x in cli("replay", cid, "--json").stdout.splitlines()]
    assert [s["event"]["version"] for s in steps] == [1, 2, 3, 4, 5, 6]
    assert [s["visible"]["messages"] for s in steps] == [0, 1, 1, 2, 1, 1]  # how many
    assert steps[4]["calls"] == [1] and steps[3]["event"]["reverted"]
    assert "temporary" in cli("replay", cid, "--to", "4").stdout
    d = json.loads(cli("diff", cid, "2", "4", "--json").stdout)
    assert [m["preview"] for m in d["added"]] == ["temporary"] and d["tokens_delta"] > 0
    assert "+ " in cli("diff", cid, "2", "4").stdout
    sent = json.loads(cli("show", cid, "--call", "1", "--json", "--openai").stdout)
    assert sent == [{"role": "user", "content": "hello"}]
    assert "call #1" in cli("show", cid, "--call", "-1").stdout
    cli("show", cid, "--call", "2", code=1)
    assert json.loads(cli("calls", cid, "--json").stdout)[0]["model"] == "gpt-4o"
    log = json.loads(cli("log", cid, "--changes", "--json", "--from-version", "4").stdout)
    assert [h["version"] for h in log] == [4, 5, 6]
    assert [m["preview"] for m in log[1]["changes"]["removed"]] == ["temporary"]


def test_fork_export_import_and_verify(cli, tmp_path):
    cid = session(cli)
    fork = cli("fork", cid, "--at-version", "4", "--name", "branch").stdout.strip()
    shown = json.loads(cli("show", fork, "--json", "--openai").stdout)
    assert [m["content"] for m in shown] == ["hello", "temporary"]
    out = tmp_path / "ctx.jsonl"
    cli("export", cid, "-o", str(out))
    other = CliRunner().invoke(
        app, ["--url", f"sqlite:///{tmp_path / 'b.db'}", "import", str(out), "--json"]
    )
    assert other.exit_code == 0, other.output
    assert json.loads(other.stdout)["context_id"] == cid
    cli("import", str(out), code=1)  # the context exists here
    copy = cli("import", str(out), "--new-id").stdout.strip()
    assert copy != cid
    transcript = tmp_path / "t.json"
    transcript.write_text(
        json.dumps([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}])
    )
    tid = cli("import", str(transcript), "--openai", "--name", "t").stdout.strip()
    assert len(json.loads(cli("show", tid, "--json", "--openai").stdout)) == 2
    assert "0 broken" in cli("verify").stdout
    with sqlite3.connect(cli.db) as conn:
        conn.execute(
            "UPDATE stored_events SET state = CAST(replace(CAST(state AS TEXT), 'hello', 'HELLO')"
            " AS BLOB) WHERE originator_id = ? AND originator_version = 2",
            (cid.replace("-", ""),),
        )
    result = cli("verify", "--json", code=6)
    report = json.loads(result.stdout)
    assert not report["ok"] and report["broken"][0]["version"] == 2
    assert report["broken"][0]["context_id"] == cid
    cli("verify", fork)  # other contexts stay verifiable


def test_call_shows_the_prompt_the_response_and_the_prompt_diff(cli):
    cid = session(cli)
    cli("insert", cid, "--content", "second question")
    cli("insert", cid, "--content", "second answer", "--role", "assistant")
    cli("usage", cid, "--model", "gpt-4o", "--prompt-tokens", "20", "--latency", "1.5")
    shown = json.loads(cli("call", cid, "2", "--json").stdout)
    assert shown["latency_ms"] == 1500.0 and "1500 ms" in cli("calls", cid).stdout
    assert [m["content"] for m in shown["messages"]] == [
        "hello",
        "second question",
        "second answer",
    ]
    assert shown["response"] == [] and shown["number"] == 2
    diff = json.loads(cli("call", cid, "-1", "--diff", "--json").stdout)["diff"]
    assert [m["preview"] for m in diff["added"]] == ["second question", "second answer"]
    assert diff["unchanged"] == 1 and diff["previous"] == 1 and not diff["removed"]
    text = cli("call", cid, "-1", "--diff").stdout
    assert "against call #1: 2 added, 0 removed, 0 changed, 1 unchanged" in " ".join(text.split())
    assert "second question" in cli("call", cid, "2").stdout
    resend = json.loads(cli("call", cid, "2", "--shape", "anthropic").stdout)
    assert [m["role"] for m in resend["messages"]] == ["user", "assistant"]  # turns merged
    assert [b["text"] for b in resend["messages"][0]["content"]] == ["hello", "second question"]
    assert "--shape must be one of" in cli("call", cid, "2", "--shape", "xml", code=1).stderr
    assert "2 recorded call(s), not a call 3" in cli("call", cid, "3", code=1).stderr
    assert "out" in cli("calls", cid).stdout
