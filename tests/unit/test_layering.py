"""The architecture stays visible: domain imports nothing outward, projections no adapters."""

import ast
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = {
    "domain": ("ctxstore.projections", "ctxstore.adapters", "projections", "adapters"),
    "projections": ("ctxstore.adapters", "adapters"),
}
# The domain is pure: no I/O libraries.
DOMAIN_IO = (
    "sqlite3",
    "psycopg",
    "eventsourcing.sqlite",
    "eventsourcing.postgres",
    "typer",
    "rich",
    "os",
    "subprocess",
    "socket",
    "requests",
    "httpx",
)


def imported_modules(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module if node.level == 0 else f"<relative>.{node.module}")
    return names


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_inner_layers_do_not_import_outer_ones(layer):
    files = sorted((ROOT / layer).rglob("*.py"))
    assert files
    for path in files:
        for name in imported_modules(path):
            assert not name.startswith("<relative>"), f"{path}: use absolute ctxstore imports"
            for bad in FORBIDDEN[layer]:
                assert name != bad and not name.startswith(bad + "."), f"{path} imports {name}"
            if layer == "domain":
                top = name.split(".")[0]
                assert name not in DOMAIN_IO and top not in DOMAIN_IO, f"{path} does I/O via {name}"


def test_the_checker_would_catch_a_violation(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from ctxstore.adapters.store.facade import ContextStore\nimport os\n")
    assert imported_modules(bad) == ["ctxstore.adapters.store.facade", "os"]


def _module_names() -> list[str]:
    names = []
    for layer in ("domain", "projections", "adapters"):
        for path in sorted((ROOT / layer).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            parts = parts[:-1] if parts[-1] == "__init__" else parts
            names.append(".".join(("ctxstore", *parts)))
    return names


def test_every_module_imports_first_in_a_fresh_interpreter():
    """A script may import any module first; an import cycle that only bites in that order
    (erasure -> the service package -> its app -> erasure did) fails here."""

    def first(name: str) -> str | None:
        done = subprocess.run(
            [sys.executable, "-c", f"import {name}"],
            check=False, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        return None if done.returncode == 0 else f"{name}: {done.stderr.strip()[-300:]}"

    with ThreadPoolExecutor(max_workers=4) as pool:
        failures = [f for f in pool.map(first, _module_names()) if f]
    assert not failures, failures


# Inside adapters/: what each sub-package may not import (by module prefix).
ADAPTER_RULES = {
    "adapters/storage": ("ctxstore.adapters.http", "ctxstore.adapters.cli",
                         "ctxstore.adapters.store", "ctxstore.adapters.integrations"),
    "adapters/store": ("ctxstore.adapters.http", "ctxstore.adapters.cli",
                       "ctxstore.adapters.integrations"),
    "adapters/llm": ("ctxstore.adapters.store", "ctxstore.adapters.storage",
                     "ctxstore.adapters.http", "ctxstore.adapters.cli"),
}  # fmt: skip
# Integrations see the contract and its results, never how the store is built.
INTEGRATIONS_MAY_IMPORT = (
    "ctxstore.adapters.store.contract",
    "ctxstore.adapters.store.results",
    "ctxstore.adapters.integrations",
    "ctxstore.domain",
)


@pytest.mark.parametrize("folder", sorted(ADAPTER_RULES))
def test_adapter_packages_keep_their_boundaries(folder):
    files = sorted((ROOT / folder).rglob("*.py"))
    assert files
    for path in files:
        for name in imported_modules(path):
            for bad in ADAPTER_RULES[folder]:
                assert not name.startswith(bad), f"{path} imports {name}"


def test_integrations_depend_on_the_contract_only():
    for path in sorted((ROOT / "adapters/integrations").rglob("*.py")):
        for name in imported_modules(path):
            if name.startswith("ctxstore"):
                assert name == "ctxstore" or name.startswith(INTEGRATIONS_MAY_IMPORT), (
                    f"{path} imports {name}"
                )


def test_adapters_has_a_handful_of_top_level_modules():
    modules = sorted(p.name for p in (ROOT / "adapters").glob("*.py"))
    assert modules == ["__init__.py", "settings.py"]
