"""The architecture stays visible: domain imports nothing outward, projections no adapters."""

import ast
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
    bad.write_text("from ctxstore.adapters.store import ContextStore\nimport os\n")
    assert imported_modules(bad) == ["ctxstore.adapters.store", "os"]
