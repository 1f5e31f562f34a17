"""Every install line a user is shown works as written: ctxstore is not on PyPI, so each
installs it from its source folder (never `pip install ctxstore` from an index, which would
fetch whatever someone else publishes under the name), with extras that exist; and a clean
virtual environment resolves them."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from ctxstore.domain.errors import MissingExtraError

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
# `pip install ...` up to the end of a code span, a line or a shell comment.
LINE = re.compile(r"pip install(?P<args>[^`#\n;&]*)")
# What names ctxstore on an install line, and the forms that install it from its source.
TARGET = re.compile(
    r"""^['"]?(?:\./ctxstore|\.|ctxstore)(?:\[[\w,-]+\])?['"]?$|^ctxstore-.*\.whl$"""
)
SOURCE = re.compile(
    r"""^['"]?(?:\./ctxstore|\.)(?:\[(?P<extras>[\w,-]+)\])?['"]?$|^ctxstore-.*\.whl$"""
)
EXTRAS = set(
    tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
)


def install_lines() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        if page.name == "changelog.md":  # (what earlier releases said)
            continue
        text = page.read_text().replace("\\\n", " ")
        for m in LINE.finditer(text):
            found.append((str(page.relative_to(ROOT)), " ".join(m.group("args").split())))
    return found


def ctxstore_targets(args: str) -> list[str]:
    """The arguments of one install line that name ctxstore (flags and other packages
    aside)."""
    return [a for a in args.split() if TARGET.match(a)]


def test_every_install_line_installs_ctxstore_from_its_source_with_real_extras():
    lines = install_lines()
    assert len(lines) > 10  # (the pages still show how to install)
    wrong = []
    for page, args in lines:
        for target in ctxstore_targets(args):
            m = SOURCE.match(target)
            if m is None:
                wrong.append(f"{page}: pip install {args} (not from ctxstore's source folder)")
                continue
            unknown = set((m.group("extras") or "").split(",")) - EXTRAS - {""}
            if unknown:
                wrong.append(f"{page}: pip install {args} (no extra {sorted(unknown)})")
    assert not wrong, wrong


def test_a_missing_extra_says_an_install_line_that_works():
    said = str(MissingExtraError("the Google ADK session service", "adk"))
    (args,) = [m.group("args") for m in LINE.finditer(said)]
    (target,) = ctxstore_targets(args)
    assert SOURCE.match(target) and "adk" in target


@pytest.mark.slow  # a clean environment resolves every extra the pages name (the index)
def test_a_clean_environment_resolves_what_the_pages_install(tmp_path):
    named = set()
    for _, args in install_lines():
        for target in ctxstore_targets(args):
            m = SOURCE.match(target)
            if m is not None and m.group("extras"):
                named |= set(m.group("extras").split(","))
    subprocess.run([sys.executable, "-m", "venv", str(tmp_path / "venv")], check=True)
    pip = tmp_path / "venv" / "bin" / "pip"
    done = subprocess.run(
        [str(pip), "install", "--dry-run", "--quiet", f"{ROOT}[{','.join(sorted(named))}]"],
        check=False, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
