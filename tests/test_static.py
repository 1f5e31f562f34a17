"""ruff and mypy --strict stay clean (the suite is the one command CI runs)."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], check=False, cwd=ROOT, capture_output=True, text=True
    )


def test_ruff_lint_and_format():
    lint = run("ruff", "check", ".")
    assert lint.returncode == 0, lint.stdout + lint.stderr
    fmt = run("ruff", "format", "--check", ".")
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr


@pytest.mark.slow  # the type checker over the package, the tests and the benchmarks
def test_mypy_strict():
    # mypy cannot follow the editable install; it reads a symlink view of the package.
    view = ROOT / ".typecheck" / "ctxstore"
    view.mkdir(parents=True, exist_ok=True)
    for name in ("__init__.py", "capture.py", "domain", "projections", "adapters", "integrations"):
        link = view / name
        if not link.is_symlink():
            link.symlink_to(Path("..", "..", name))
    for target in ([], ["tests", "bench"]):
        done = run("mypy", *target)
        assert done.returncode == 0, done.stdout + done.stderr


def test_generated_faces_are_current():
    """The async contract, the async store's offloaded operations and the sharded store's
    routed ones are generated (tools/gen_faces.py): never edited by hand, never stale."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gen_faces.py"), "--check"],
        check=False, cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
