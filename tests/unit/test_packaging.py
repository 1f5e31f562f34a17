"""The wheel ships every package folder, and nothing lands at the top level by accident."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA_ONLY = {"ctxstore.adapters.http.web", "ctxstore.adapters.http.web.js"}  # the web view's files
NOT_PACKAGES = {
    "tests",
    "bench",
    "docs",
    ".ci",
    ".venv",
    ".typecheck",
    "build",
    "dist",
    ".git",
    "tools",
}


def test_every_code_folder_is_a_listed_package():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(config["tool"]["setuptools"]["packages"]) - DATA_ONLY
    on_disk = {"ctxstore"}
    for init in ROOT.rglob("__init__.py"):
        rel = init.parent.relative_to(ROOT)
        if rel.parts and (rel.parts[0] in NOT_PACKAGES or rel.parts[0].endswith(".egg-info")):
            continue
        if rel.parts:
            on_disk.add("ctxstore." + ".".join(rel.parts))
    assert listed == on_disk
    for folder in ("domain", "projections", "adapters", "integrations"):
        for sub in (ROOT / folder).rglob("*.py"):
            assert (sub.parent / "__init__.py").exists(), f"{sub.parent} lacks __init__.py"


def test_only_the_facade_is_a_module_at_the_root():
    # (and `python -m ctxstore`'s entry point, and ctxstore.capture: what the model saw)
    assert sorted(p.name for p in ROOT.glob("*.py")) == ["__init__.py", "__main__.py", "capture.py"]


def test_the_package_says_it_is_typed_and_its_version():
    import ctxstore

    assert (ROOT / "py.typed").exists()
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "py.typed" in config["tool"]["setuptools"]["package-data"]["ctxstore"]
    assert ctxstore.__version__ == config["project"]["version"]
    assert "BlobTooLargeError" in ctxstore.__all__


def test_the_http_client_is_public_at_the_root_and_loads_when_used():
    import subprocess
    import sys

    script = (
        "import sys, ctxstore; "
        "assert 'ctxstore.adapters.http.client' not in sys.modules; "
        "from ctxstore import CtxStoreClient; "
        "from ctxstore.adapters.http.client import CtxStoreClient as Old; "
        "assert CtxStoreClient is Old and 'CtxStoreClient' in ctxstore.__all__"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
