"""Configuration mistakes: one line naming the setting or path, exit 8, nothing written;
`ctxstore.open()` raises ConfigurationError."""

import pytest
from typer.testing import CliRunner

import ctxstore
from ctxstore.adapters.cli.app import app

CASES = {
    "tokens not JSON": ({"CTXSTORE_SERVICE__TOKENS": "{bad"}, "CTXSTORE_SERVICE__TOKENS"),
    "interval not a number": ({"CTXSTORE_SNAPSHOT_INTERVAL": "abc"}, "CTXSTORE_SNAPSHOT_INTERVAL"),
    "safety above 1": ({"CTXSTORE_PROMPT__SAFETY": "2"}, "CTXSTORE_PROMPT__SAFETY"),
    "unknown compaction key": ({"CTXSTORE_COMPACTION__IN_BATCH": "true"}, "IN_BATCH"),
}


@pytest.fixture
def isolated(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CTXSTORE_URL", f"sqlite:///{tmp_path / 'store.db'}")
    for name in ("CTXSTORE_CONFIG", "CTXSTORE_SERVICE__TOKENS"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def run(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(app, list(args), env=env)


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_setting_is_one_line_naming_it(isolated, case, monkeypatch):
    env, named = CASES[case]
    result = run("contexts", env=env)
    assert result.exit_code == 8, result.output
    assert result.stderr.count("\n") == 1 and named in result.stderr, result.stderr
    assert "Traceback" not in result.output
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(ctxstore.ConfigurationError, match=named):
        ctxstore.open("memory://")
    assert not (isolated / "store.db").exists()


def test_config_file_mistakes(isolated):
    bad = isolated / "bad.toml"
    bad.write_text("url = [")
    result = run("contexts", env={"CTXSTORE_CONFIG": str(bad)})
    assert result.exit_code == 8 and "bad.toml" in result.stderr and "TOML" in result.stderr
    result = run("contexts", env={"CTXSTORE_CONFIG": str(isolated / "missing.toml")})
    assert result.exit_code == 8 and "missing.toml" in result.stderr
    (isolated / "ctxstore.toml").write_text("[prompt]\nsafety = 3\n")
    result = run("contexts")
    assert result.exit_code == 8 and "prompt.safety in ctxstore.toml" in result.stderr


def test_paths_that_are_wrong(isolated):
    cid = run("create", "--json").stdout.split('"context_id": "')[1].split('"')[0]
    result = run("export", cid, "-o", str(isolated / "missing" / "x.jsonl"))
    assert result.exit_code == 8 and "missing/x.jsonl" in result.stderr
    assert not (isolated / "missing").exists()
    (isolated / "text.db").write_text("hello, not a database")
    result = run("--url", f"sqlite:///{isolated / 'text.db'}", "contexts")
    assert result.exit_code == 8 and "not a SQLite database" in result.stderr


def test_a_data_folder_that_cannot_be_made_is_one_line(isolated, monkeypatch):
    """A read-only home, or a file where the data folder should be: the folder and the
    settings to change, exit 8, no traceback."""
    blocked = isolated / "home-is-a-file"
    blocked.write_text("not a folder")
    monkeypatch.delenv("CTXSTORE_URL")
    monkeypatch.setenv("CTXSTORE_DATA_DIR", str(blocked / "ctxstore"))
    result = run("create")
    assert result.exit_code == 8, result.output
    assert result.stderr.count("\n") == 1, result.stderr
    assert str(blocked) in result.stderr and "CTXSTORE_DATA_DIR" in result.stderr
    assert "Traceback" not in result.output
    with pytest.raises(ctxstore.ConfigurationError, match="CTXSTORE_DATA_DIR"):
        ctxstore.open()


def test_two_sources_of_the_key_are_refused_without_showing_either(isolated):
    from eventsourcing.cryptography import AESCipher

    key = AESCipher.create_key(32)
    (isolated / "keys").write_text(AESCipher.create_key(32) + "\n")
    env = {"CTXSTORE_ENCRYPTION_KEY": key, "CTXSTORE_KEY_FILE": str(isolated / "keys")}
    result = run("contexts", env=env)
    assert result.exit_code == 8, result.output
    said = result.stderr
    assert "CTXSTORE_ENCRYPTION_KEY and CTXSTORE_KEY_FILE" in said and key not in said


def test_a_read_only_database_file_is_named(tmp_path):
    """A file the store cannot write (made immutable: a root test user ignores modes)."""
    import shutil
    import subprocess

    db = tmp_path / "ro.db"
    with ctxstore.open(f"sqlite:///{db}") as store:
        store.create()
    made = shutil.which("chattr") and subprocess.run(["chattr", "+i", str(db)], check=False)
    if not made or made.returncode:
        pytest.skip("chattr +i is not available here")
    try:
        result = CliRunner().invoke(app, ["--url", f"sqlite:///{db}", "create"])
    finally:
        subprocess.run(["chattr", "-i", str(db)], check=True)
    assert result.exit_code == 5, result.output
    assert f"the SQLite file {db} cannot be written" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.output


def test_a_damaged_sqlite_file_is_a_typed_error_and_one_line(tmp_path):
    """Its last page overwritten: opening it raises StoreUnavailableError saying the file
    is damaged; `ctxstore verify` and every other command print one line, exit 5."""
    import os

    db = tmp_path / "damaged.db"
    with ctxstore.open(f"sqlite:///{db}") as store:
        for _ in range(40):
            store.insert(store.create(), {"role": "user", "content": "x" * 500})
    with db.open("r+b") as f:
        f.seek(db.stat().st_size - 4096)
        f.write(os.urandom(4096))
    with pytest.raises(ctxstore.StoreUnavailableError, match="the file is damaged"):
        ctxstore.open(f"sqlite:///{db}")
    for command in (["verify"], ["contexts"], ["show", "00000000-0000-0000-0000-000000000000"]):
        result = CliRunner().invoke(app, ["--url", f"sqlite:///{db}", *command])
        assert result.exit_code == 5, (command, result.output)
        assert "Traceback" not in result.output
        assert result.stderr.strip().splitlines()[-1].startswith("error: cannot open the store")
