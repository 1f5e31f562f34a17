"""The ctxstore command line on a SQLite file: operations, reads, JSON, errors."""

import base64
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


def test_a_session_through_the_cli(cli):
    cid = json.loads(cli("create", "--name", "demo", "--json").stdout)["context_id"]
    cli("insert", cid, "--role", "system", "--content", "be brief")
    lines = "\n".join(
        json.dumps(m)
        for m in [
            {"role": "user", "content": "weather?"},
            {
                "role": "assistant",
                "tool_calls": [{"id": "c1", "function": {"name": "w", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        ]
    )
    out = json.loads(cli("insert", cid, "--json", input=lines).stdout)
    assert out["version"] == 3 and len(out["ids"]) == 3
    cli("insert", cid, input=json.dumps([{"role": "assistant", "content": "It is sunny."}]))
    cli("replace", cid, "#1", "--content", "weather in Paris?")
    cli("batch-start", cid)
    cli("insert", cid, "--role", "system", "--content", "temporary", "--after", "#0")
    shown = json.loads(cli("show", cid, "--json").stdout)
    assert [m["role"] for m in shown["messages"]] == [
        "system",
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert shown["batch"] == 1
    cli("batch-end", cid, "--to", "0")
    cli(
        "compress",
        cid,
        "#1",
        "#2",
        "#3",
        "#4",
        "--summary",
        "asked about Paris: sunny",
        "--stats",
        '{"n": 4}',
    )
    api = json.loads(cli("show", cid, "--json", "--openai").stdout)
    assert api == [
        {"role": "system", "content": "be brief"},
        {"role": "system", "content": "asked about Paris: sunny"},  # a summary's role
    ]
    old = json.loads(cli("show", cid, "--json", "--at-version", "3").stdout)
    assert len(old["messages"]) == 4
    log = json.loads(cli("log", cid, "--json").stdout)
    assert [e["type"] for e in log] == [
        "create",
        "insert",
        "insert",
        "insert",
        "replace",
        "batch_start",
        "insert",
        "batch_end",
        "compress",
    ]
    assert [e["reverted"] for e in log][5:7] == [True, True]
    assert all(e["actor"] == "cli-test" for e in log)
    table = cli("show", cid).stdout
    assert "asked about Paris: sunny" in table and "summary of 4" in table
    assert "rollback" in cli("log", cid).stdout
    assert cid in cli("contexts").stdout


@pytest.mark.parametrize(
    ("args", "stdin", "code", "needle"),
    [
        (["insert", "{cid}"], '{"role": "user"}', 1, "needs content"),
        (["insert", "{cid}"], "not json\n", 1, "line 1 is not JSON"),
        (["insert", "{cid}"], "", 1, "no message given"),
        (["delete", "{cid}", "msg_nope"], None, 3, "msg_nope"),
        (["delete", "{cid}", "#5"], None, 3, "position 5"),
        (["show", "00000000-0000-0000-0000-000000000000"], None, 3, "no context"),
        (["batch-end", "{cid}"], None, 1, "no batch is open"),
        (["insert", "{cid}", "--content", "x", "--expected-version", "1"], None, 4, "not 1"),
        (["create", "--metadata", "{bad"], None, 1, "--metadata is not JSON"),
    ],
)
def test_bad_input_gives_one_line_and_a_nonzero_exit(cli, args, stdin, code, needle):
    cid = cli("create").stdout.strip()
    cli("insert", cid, "--content", "hello")
    result = cli(*[a.replace("{cid}", cid) for a in args], input=stdin, code=code)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0]
    assert len(json.loads(cli("log", cid, "--json").stdout)) == 2  # nothing written


def test_the_installed_command_runs(tmp_path):
    exe = shutil.which("ctxstore", path=str(Path(sys.executable).parent))
    assert exe is not None, "pip install installs the ctxstore console script beside python"
    url = f"sqlite:///{tmp_path / 'x.db'}"
    done = subprocess.run([exe, "--url", url, "create"], capture_output=True, text=True, check=True)
    assert len(done.stdout.strip()) == 36


def test_tokens_prompt_and_usage_through_the_cli(cli):
    cid = json.loads(cli("create", "--encoding", "cl100k_base", "--json").stdout)["context_id"]
    cli("insert", cid, "--role", "system", "--content", "Be brief.")
    for n in range(6):
        cli("insert", cid, "--content", f"question number {n} about the weather in Paris")
        cli("insert", cid, "--role", "assistant", "--content", f"answer number {n}: sunny")
    shown = json.loads(cli("show", cid, "--json").stdout)
    assert (
        shown["tokens"] == sum(shown["token_counts"].values()) + 3 and shown["estimated"] is False
    )
    assert "tokens" in cli("show", cid).stdout
    p = json.loads(cli("prompt", cid, "--budget", "80", "--strategy", "full", "--json").stdout)
    assert p["tokens"] <= p["limit"] == 72 and p["omitted"]
    assert p["messages"][1]["id"] == "ctxstore-marker"
    api = json.loads(cli("prompt", cid, "--budget", "1000", "--json", "--openai").stdout)
    assert api[0] == {"role": "system", "content": "Be brief."}
    table = cli("prompt", cid, "--budget", "80").stdout
    assert "left out" in table and "oldest turn" in table
    cli("prompt", cid, "--budget", "5", code=1)  # the must-keeps alone do not fit
    cli("prompt", cid, "--budget", "500", "--strategy", "nope", code=1)
    cli("usage", cid, "--model", "gpt-4o", "--prompt-tokens", str(shown["tokens"] + 10))
    report = json.loads(cli("usage-report", "--json").stdout)
    assert report[0]["model"] == "gpt-4o" and report[0]["counted_tokens"] == shown["tokens"]
    assert "gpt-4o" in cli("usage-report").stdout
    assert (
        json.loads(cli("log", cid, "--json", "--type", "usage").stdout)[0]["details"]["model"]
        == "gpt-4o"
    )
    cli("create", "--encoding", "cl100k", code=1)


def test_compact_through_the_cli(cli):
    cid = cli("create").stdout.strip()
    for n in range(5):
        lines = "\n".join(json.dumps(m) for m in [
            {"role": "user", "content": f"step {n}. check it."},
            {"role": "assistant", "tool_calls": [{"id": f"k{n}", "function": {"name": "check", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": f"k{n}", "content": "ok. " + "line " * 50},
        ])  # fmt: skip
        cli("insert", cid, input=lines)
    dry = cli("compact", cid, "--dry-run").stdout
    assert "plan: half-window" in dry and "dry run: nothing written" in dry
    assert len(json.loads(cli("log", cid, "--json").stdout)) == 6
    done = json.loads(cli("compact", cid, "--json").stdout)
    assert done["summary_id"] and done["batch"] == 0 and done["stats"]["algorithm"] == "bisect_v1"
    again = cli("compact", cid).stdout  # 3 rounds left since that summary: too few
    assert "skipped:" in again and "latest summary" in again
    tiny = cli("create").stdout.strip()
    cli("insert", tiny, "--content", "hi")
    cli("compact", tiny, code=1)


def test_show_marks_refusals_spoken_replies_and_custom_calls(cli):
    cid = json.loads(cli("create", "--json").stdout)["context_id"]
    said = [
        {"role": "user", "content": "read me the plan"},
        {"role": "assistant", "content": None, "audio": {"id": "audio_42"}},
        {"role": "assistant", "refusal": "not that part"},
        {"role": "assistant", "tool_calls": [
            {"id": "k1", "type": "custom", "custom": {"name": "patch", "input": "+plan"}}
        ]},
        {"role": "tool", "tool_call_id": "k1", "content": "patched"},
    ]  # fmt: skip
    cli("insert", cid, input=json.dumps(said))
    table = cli("show", cid).stdout
    assert "[audio reply audio_42]" in table and "[refusal] not that part" in table
    assert "[calls patch(+plan)]" in table
    shown = json.loads(cli("show", cid, "--json").stdout)["messages"]
    assert shown[1]["audio"] == {"id": "audio_42"} and "audio" not in shown[0]  # nulls left out


def test_migrate_brings_a_store_to_the_current_version_once(cli):
    first = json.loads(cli("migrate", "--json").stdout)
    assert first == {"version": 9, "applied": [1, 2, 3, 4, 5, 6, 7, 8, 9]}
    assert json.loads(cli("migrate", "--json").stdout) == {"version": 9, "applied": []}
    assert "schema at version 9" in cli("migrate").stdout


def test_serve_refuses_a_port_it_cannot_listen_on_in_one_line(cli):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = cli("serve", "--port", str(port), code=8)
    assert "in use" in result.stderr and result.stderr.count("\n") == 1, result.stderr
    assert "serving" not in result.output
    assert "65535" in cli("serve", "--port", "99999", code=2).output


def test_the_readme_lines_run_as_written(cli):
    """`replay --to` past the head is refused as `show --at-version` refuses it (one rule);
    a dry-run compaction of a context with nothing to summarize says so instead of failing."""
    import json as _json

    cid = _json.loads(cli("create", "--json").stdout)["context_id"]
    cli("insert", cid, "--role", "user", "--content", "hi")
    steps = [
        _json.loads(line) for line in cli("replay", cid, "--to", "2", "--json").stdout.splitlines()
    ]
    assert [s["event"]["version"] for s in steps] == [1, 2]
    past = cli("replay", cid, "--to", "37", code=1)
    shown = cli("show", cid, "--at-version", "37", code=1)
    assert "1..2" in past.output and "head is version 2" in shown.output
    from ctxstore.adapters.store.facade import ContextStore

    with ContextStore.from_url(cli.url) as store:
        plan = store.compact(cid, dry_run=True)
    assert plan.dry_run and plan.skipped and "nothing to summarize" in plan.skipped


def test_import_names_what_it_was_given_and_the_flag_as_typed(cli, tmp_path):
    chat = tmp_path / "chat.jsonl"
    chat.write_text(
        '{"role": "user", "content": "hi"}\n{"role": "assistant", "content": "hello"}\n'
    )
    said = cli("import", str(chat), code=1).stderr
    assert "--openai" in said and "--without-trailer" not in said
    assert not said.startswith("\n") and said.count("\n") == 1
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"role": "user", "content": "hi"}\n{bad\n')
    said = cli("import", "--openai", str(bad), code=1).stderr
    assert said.startswith("error: line 2") and said.count("\n") == 1
    export = cli("export", cli("create").stdout.strip()).stdout
    (tmp_path / "ctx.jsonl").write_text(export)
    said = cli("import", str(tmp_path / "ctx.jsonl"), code=1).stderr
    assert "--new-id" in said


def test_rekey_says_what_it_waits_for(cli, monkeypatch):
    from eventsourcing.cryptography import AESCipher

    monkeypatch.setenv("CTXSTORE_ENCRYPTION_KEY", AESCipher.create_key(32))
    cid = cli("create").stdout.strip()
    cli("insert", cid, "--role", "user", "--content", "hi")
    result = cli("keys", "rekey", cid, "--wait", "0.2")
    assert "waiting 0.2 s for other processes' cached keys" in result.stderr
    assert "--wait 0" in result.stderr and f"re-keyed {cid}" in result.stdout
    # Not a terminal: plain progress lines, the last when the wait is over.
    assert "waiting for cached keys to expire: 0.2 of 0.2 s" in result.stderr
    done = cli("encrypt")
    assert "sealing contexts: 1 contexts" in done.stderr or "sealed" in done.stdout
    rotated = cli("keys", "rotate")
    assert "re-wrapping data keys" in rotated.stderr or "re-wrapped" in rotated.stdout


def test_progress_is_a_line_every_few_seconds_off_a_terminal(monkeypatch, capsys):
    from ctxstore.adapters.cli import progress as shown

    clock = iter([0.0, 1.0, 6.0, 7.0, 8.0])
    monkeypatch.setattr(shown.time, "monotonic", lambda: next(clock))
    with shown.progress("waiting", "s") as tell:
        tell(1, 10)  # too soon after the start
        tell(6, 10)  # five seconds on: said
        tell(7, 10)  # too soon again
        tell(10, 10)  # finished: always said
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["waiting: 6 of 10 s", "waiting: 10 of 10 s"]


def test_empty_listings_say_so_and_contexts_pages_as_over_http(cli):
    cli("migrate")  # an empty store
    assert cli("erasures").stdout.strip() == "no erasures"
    assert "┏" not in cli("contexts").stdout and "no contexts" in cli("contexts").stdout
    ids = [cli("create", "--name", f"chat {n}").stdout.strip() for n in range(3)]
    import json as _json

    first = _json.loads(cli("contexts", "--limit", "2", "--json").stdout)
    assert [c["context_id"] for c in first] == ids[:2]
    rest = _json.loads(cli("contexts", "--after", ids[1], "--json").stdout)
    assert [c["context_id"] for c in rest] == ids[2:]
    found = _json.loads(cli("contexts", "--search", "chat 1", "--json").stdout)
    assert [c["context_id"] for c in found] == [ids[1]]
    assert "no contexts named with 'zzz'" in cli("contexts", "--search", "zzz").stdout


def test_show_at_time_takes_an_age(cli):
    import json as _json
    import time as _time

    cid = cli("create").stdout.strip()
    cli("insert", cid, "--role", "user", "--content", "first")
    _time.sleep(1.2)
    cli("insert", cid, "--role", "user", "--content", "second")
    then = _json.loads(cli("show", cid, "--at-time", "1s", "--json").stdout)
    assert then["version"] == 2
    assert "an ISO time or an age" in cli("show", cid, "--at-time", "soon", code=1).stderr


def test_flags_show_no_type_in_the_help(cli):
    assert "<bool>" not in cli("show", "--help").stdout
    assert "<bool>" not in cli("insert", "--help").stdout


def test_a_global_option_after_the_command_explains_itself():
    from ctxstore.adapters.cli.app import misplaced_global

    assert misplaced_global(["show", "abc", "--actor", "ops"]) == ("--actor", "show")
    assert misplaced_global(["--url", "sqlite:///x.db", "show", "abc", "--url=y"]) == (
        "--url",
        "show",
    )
    assert misplaced_global(["--actor", "ops", "show", "abc", "--json"]) is None
    import subprocess
    import sys as _sys

    done = subprocess.run([_sys.executable, "-m", "ctxstore", "show", "abc", "--actor", "ops"],
                          check=False, capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 2 and "before the command" in done.stderr
    assert done.stderr.count("\n") == 1


def test_an_error_under_json_is_json(cli):
    import json as _json

    cli("create")
    said = cli("show", "00000000-0000-4000-8000-000000000000", "--json", code=3).stderr
    assert _json.loads(said) == {
        "error": "ContextNotFoundError",
        "detail": "no context with id 00000000-0000-4000-8000-000000000000", "exit": 3,
    }  # fmt: skip


def test_log_json_has_the_fields_audit_json_has(cli):
    import json as _json

    cid = cli("create").stdout.strip()
    [entry] = _json.loads(cli("log", cid, "--json").stdout)
    audited = _json.loads(cli("audit", "--json").stdout.splitlines()[0])
    assert "reverted_by" in entry and entry["reverted_by"] is None
    assert set(audited) - {"position", "context_id"} <= set(entry)


def test_json_nested_too_deeply_is_one_line_not_a_traceback(cli, tmp_path):
    cid = cli("create").stdout.strip()
    deep = "[" * 100_000 + "]" * 100_000
    for args in (("insert", cid), ("import",), ("import", "--openai")):
        done = cli(*args, input=deep, code=1)
        assert "nested too deeply" in done.stderr and "Traceback" not in done.output
    message = (
        '{"role": "user", "content": "x", "metadata": ' + '{"a": ' * 500 + "1" + "}" * 500 + "}"
    )
    done = cli("insert", cid, input=message, code=1)
    assert "nested deeper than 64" in done.stderr
    assert len(json.loads(cli("log", cid, "--json").stdout)) == 1  # nothing written


def test_batches_says_when_none_is_open(cli):
    import json as _json

    cid = _json.loads(cli("create", "--json").stdout)["context_id"]
    assert "no open batches" in cli("batches", cid).output
    cli("batch-start", cid)
    listed = cli("batches", cid).output
    assert "open batches" in listed and "no open" not in listed


def test_a_missing_key_is_one_line_naming_the_setting(tmp_path, monkeypatch):
    """An encrypted store read without its key: one line that names the setting to set,
    not the library's deserialisation error with its topic."""
    from pydantic import SecretStr

    from ctxstore.adapters.settings import Settings
    from ctxstore.adapters.store.facade import ContextStore

    url = f"sqlite:///{tmp_path / 'sealed.db'}"
    key = SecretStr(base64.b64encode(b"k" * 32).decode())
    with ContextStore.from_url(url, Settings(encryption_key=key)) as store:
        store.create(name="secret")
    from typer.testing import CliRunner

    from ctxstore.adapters.cli.app import app

    monkeypatch.delenv("CTXSTORE_ENCRYPTION_KEY", raising=False)
    done = CliRunner().invoke(app, ["--url", url, "contexts"])
    assert done.exit_code == 5, done.output
    said = done.output.strip()
    assert said.count("\n") == 0 and "no key is set" in said and "CTXSTORE_ENCRYPTION_KEY" in said
    assert "Mapper" not in said and "topic" not in said


@pytest.mark.postgres
def test_a_read_on_an_empty_postgresql_database_creates_nothing_and_says_so(tmp_path, request):
    import psycopg
    from typer.testing import CliRunner

    from ctxstore.adapters.cli.app import app

    from ..conftest import make_url

    url = make_url("postgres", tmp_path, request, migrated=False)
    base, _, query = url.partition("?")
    schema = query.split("schema=")[1] if "schema=" in query else "public"
    runner = CliRunner()
    for read in (["contexts"], ["audit"], ["search", "anything"]):
        done = runner.invoke(app, ["--url", url, *read])
        assert done.exit_code == 5, done.output
        assert "no schema yet" in done.output and "ctxstore migrate" in done.output
    with psycopg.connect(base) as conn:
        tables = conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = %s", (schema,)
        ).fetchone()
    assert tables == (0,)
    assert runner.invoke(app, ["--url", url, "create"]).exit_code == 0  # a write creates it


def test_the_default_store_says_where_it_was_made_once(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from ctxstore.adapters.cli.app import app

    monkeypatch.delenv("CTXSTORE_URL", raising=False)
    monkeypatch.setenv("CTXSTORE_DATA_DIR", str(tmp_path / "data"))
    runner = CliRunner()
    first = runner.invoke(app, ["create", "--name", "a"])
    assert first.exit_code == 0, first.output
    assert f"created the store {tmp_path / 'data' / 'ctxstore.db'}" in first.stderr
    again = runner.invoke(app, ["create", "--name", "b"])
    assert again.exit_code == 0 and "created the store" not in again.stderr
