"""The README's Python example runs as written."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_python_blocks_run(tmp_path, monkeypatch, capsys):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    assert blocks
    monkeypatch.chdir(tmp_path)
    for block in blocks:
        exec(compile(block, str(README), "exec"), {})  # noqa: S102 - the README is ours
    assert "refused:" in capsys.readouterr().out
    assert (tmp_path / "example.db").exists()


def test_the_two_commands_are_there():
    text = README.read_text()
    assert ".venv/bin/ctxstore demo" in text
    ci = (README.parent / ".ci" / "run").read_text()
    test_command = re.search(
        r"^(python3 -m venv .* && \.venv/bin/pytest[^\n]*)$", text, flags=re.MULTILINE
    )
    assert test_command and test_command.group(1) in ci


def test_every_setting_is_documented():
    from ctxstore.adapters.settings import Settings

    text = (README.parent / "docs" / "reference" / "configuration.md").read_text()
    for name, field in Settings.model_fields.items():
        variable = field.validation_alias or f"CTXSTORE_{name.upper()}"
        assert f"`{variable}`" in text, name
