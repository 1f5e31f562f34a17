"""The documentation: the site builds with --strict (a broken link fails), its generated
references say what the code says, its tutorial and how-to examples run as written, every
page is in the navigation, and the README stays a short guide whose links resolve."""

from __future__ import annotations

import ast
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
RUN = sorted([*DOCS.glob("tutorial/*.md"), *DOCS.glob("how-to/*.md")])


@pytest.mark.slow
def test_the_site_builds_strict(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "reference" / "python" / "index.html").exists()
    api = (tmp_path / "reference" / "python" / "index.html").read_text()
    assert "build_prompt" in api and "ContextOperations" in api  # from the docstrings


def test_the_generated_references_are_current():
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gen_docs.py"), "--check"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def is_fragment(block: str) -> bool:
    """A block with elided parts (`...`, e.g. a provider call's arguments) shows where
    ctxstore goes in your own code: it is shown, not run. Every other block runs."""
    tree = compile(block, "<docs>", "exec", ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    return any(isinstance(n, ast.Constant) and n.value is Ellipsis for n in ast.walk(tree))


@pytest.mark.parametrize("page", RUN, ids=lambda p: str(p.relative_to(DOCS)))
def test_the_examples_run_as_written(page, tmp_path, monkeypatch):
    found = re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.DOTALL)
    blocks = [b for b in found if not is_fragment(b)]
    if not blocks:
        pytest.skip("no runnable Python example on this page")
    monkeypatch.chdir(tmp_path)
    scope: dict[str, object] = {}
    for block in blocks:  # one page's blocks run in order, as one script
        exec(compile(block, str(page), "exec"), scope)  # noqa: S102 - our own pages


def test_every_page_is_in_the_navigation():
    nav = (ROOT / "mkdocs.yml").read_text().split("\nnav:\n", 1)[1]
    listed = set(re.findall(r"^\s*- [^:\n]+: ([\w/.-]+\.md)$", nav, flags=re.MULTILINE))
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert pages == listed, (pages - listed, listed - pages)


def test_the_readme_is_a_short_guide_whose_links_resolve():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    paragraphs = [p for p in re.split(r"\n\n|\n- ", text) if not p.startswith("```")]
    assert max(len(p.split()) for p in paragraphs) < 150
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    assert targets and not [t for t in targets if not (ROOT / t).exists()]


def test_troubleshooting_says_what_to_do_for_every_error():
    from ctxstore.domain import errors

    text = (DOCS / "troubleshooting.md").read_text()
    classes = [
        c.__name__ for c in vars(errors).values()
        if inspect.isclass(c) and issubclass(c, errors.CtxStoreError)
    ]  # fmt: skip
    assert not [name for name in classes if f"**`{name}`**" not in text]
    for code in range(9):
        assert f"| {code} |" in text
