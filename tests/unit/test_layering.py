"""The architecture stays visible: domain imports nothing outward, projections no adapters."""

import json
import os
import subprocess
import sys
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


# Files are parsed in a child interpreter: CPython 3.11 keeps the AST converter's recursion
# count in one place per interpreter, so a parse overlapping another thread's (a traceback
# printed by a leftover thread parses its source lines) fails with "AST constructor
# recursion depth mismatch".
IMPORTS_OF = r"""
import ast, json, sys

class Imports(ast.NodeVisitor):
    # Each import as [module, names, level, whether it only runs for type checkers].
    def __init__(self):
        self.found, self.checking = [], False

    def visit_If(self, node):
        if "TYPE_CHECKING" in ast.unparse(node.test):
            was, self.checking = self.checking, True
            for n in node.body:
                self.visit(n)
            self.checking = was
            for n in node.orelse:
                self.visit(n)
            return
        self.generic_visit(node)

    def visit_Import(self, node):
        for a in node.names:
            self.found.append([a.name, [], 0, self.checking])

    def visit_ImportFrom(self, node):
        if node.module:
            names = [a.name for a in node.names]
            self.found.append([node.module, names, node.level, self.checking])

found = {}
for path in sys.argv[1:]:
    visitor = Imports()
    visitor.visit(ast.parse(open(path, encoding="utf-8").read(), filename=path))
    found[path] = visitor.found
print(json.dumps(found))
"""
Import = tuple[str, list[str], int, bool]  # module, names imported from it, level, typing-only


def parsed_imports(paths: list[Path]) -> dict[Path, list[Import]]:
    done = subprocess.run(
        [sys.executable, "-c", IMPORTS_OF, *map(str, paths)],
        check=True, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    return {Path(p): [tuple(i) for i in found] for p, found in json.loads(done.stdout).items()}


def imports_of(paths: list[Path]) -> dict[Path, list[str]]:
    """The modules each file imports, by name (relative imports marked `<relative>.`)."""
    return {
        path: [m if level == 0 else f"<relative>.{m}" for m, _, level, _ in found]
        for path, found in parsed_imports(paths).items()
    }


def imported_modules(path: Path) -> list[str]:
    return imports_of([path])[path]


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_inner_layers_do_not_import_outer_ones(layer):
    files = sorted((ROOT / layer).rglob("*.py"))
    assert files
    for path, names in imports_of(files).items():
        for name in names:
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
    for layer in ("domain", "projections", "adapters", "integrations"):
        for path in sorted((ROOT / layer).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            parts = parts[:-1] if parts[-1] == "__init__" else parts
            names.append(".".join(("ctxstore", *parts)))
    return names


# One fresh interpreter loads what ctxstore builds on (the modules a throwaway child finds
# loaded after importing all of ctxstore, ctxstore's own excepted), then forks a child per
# module: each child imports its module before any other ctxstore module, as a fresh
# interpreter would, without importing pydantic, FastAPI and the SDKs again every time.
FIRST_IMPORTS = r"""
import importlib, os, sys
names = sys.argv[1].split(",")
ours = lambda m: m == "ctxstore" or m.startswith("ctxstore.") or m.split(".")[0] in sys.argv[2].split(",")
read, write = os.pipe()
if os.fork() == 0:
    for name in names:
        try:
            importlib.import_module(name)
        except BaseException:
            pass
    found = sorted(m for m in list(sys.modules) if not ours(m) and not m.startswith("__"))
    with os.fdopen(write, "w") as out:
        out.write("\n".join(found))
    os._exit(0)
os.close(write)
with os.fdopen(read) as said:
    libraries = said.read().split()
os.wait()
for lib in libraries:
    try:
        importlib.import_module(lib)
    except BaseException:
        pass
assert not [m for m in sys.modules if ours(m)], "a library imported ctxstore"
failures, running = [], {}
def reap():
    child, status = os.wait()
    name, read = running.pop(child)
    said = os.read(read, 1000).decode()
    os.close(read)
    if status != 0:
        failures.append(said or f"{name}: the import crashed")
for name in names:
    if len(running) >= (os.cpu_count() or 1):
        reap()
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read)
        try:
            importlib.import_module(name)
            os._exit(0)
        except BaseException as exc:
            os.write(write, f"{name}: {type(exc).__name__}: {exc}"[-400:].encode())
            os._exit(1)
    os.close(write)
    running[child] = (name, read)
while running:
    reap()
print("\n".join(sorted(failures)))
sys.exit(1 if failures else 0)
"""


def imports_failing_first(names: list[str], path: str | None = None) -> str:
    """What fails when each of `names` is the first ctxstore module a process imports."""
    env = {**os.environ, **({"PYTHONPATH": path} if path else {})}
    done = subprocess.run(
        [sys.executable, "-c", FIRST_IMPORTS, ",".join(names), names[0].split(".")[0]],
        check=False, capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    return "" if done.returncode == 0 else (done.stdout + done.stderr).strip()


@pytest.mark.slow  # an interpreter per module
def test_every_module_imports_first_in_a_fresh_interpreter():
    """A script may import any module first; an import cycle that only bites in that order
    (erasure -> the service package -> its app -> erasure did) fails here."""
    assert imports_failing_first(_module_names()) == ""


def test_a_cycle_that_bites_when_imported_first_is_caught(tmp_path):
    package = tmp_path / "cyclic"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from cyclic.b import B\nA = 1\n")
    (package / "b.py").write_text("from cyclic.a import A\nB = 2\n")
    (package / "fine.py").write_text("import json\n")
    said = imports_failing_first(["cyclic.fine", "cyclic.b"], str(tmp_path))
    assert "cyclic.b: ImportError" in said and "cyclic.fine" not in said


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
    "ctxstore.adapters.capture",  # what the model saw: itself on the contract and the domain
    "ctxstore.adapters.threads.settled",  # a thread's write awaited through cancellations
    "ctxstore.adapters.store.contract",
    "ctxstore.adapters.store.hooks",  # the stores' hooks, where the surface has them
    "ctxstore.adapters.store.results",
    "ctxstore.adapters.integrations",
    "ctxstore.domain",
)


@pytest.mark.parametrize("folder", sorted(ADAPTER_RULES))
def test_adapter_packages_keep_their_boundaries(folder):
    files = sorted((ROOT / folder).rglob("*.py"))
    assert files
    for path, names in imports_of(files).items():
        for name in names:
            for bad in ADAPTER_RULES[folder]:
                assert not name.startswith(bad), f"{path} imports {name}"


def test_integrations_depend_on_the_contract_only():
    for path in sorted((ROOT / "adapters/integrations").rglob("*.py")):
        for name in imported_modules(path):
            if name.startswith("ctxstore"):
                assert name == "ctxstore" or name.startswith(INTEGRATIONS_MAY_IMPORT), (
                    f"{path} imports {name}"
                )


def test_the_short_integration_paths_only_re_export():
    """`ctxstore.integrations` is the integrations' short import path, nothing more: its
    modules import only `ctxstore.adapters.integrations` (so each loads one SDK, and no
    code lives outside the layers)."""
    files = sorted((ROOT / "integrations").glob("*.py"))
    assert len(files) > 1
    for path, found in parsed_imports(files).items():
        for module, _, level, _ in found:
            assert level == 0 and module.startswith("ctxstore.adapters.integrations."), (
                f"{path} imports {module}"
            )


def test_adapters_has_a_handful_of_top_level_modules():
    modules = sorted(p.name for p in (ROOT / "adapters").glob("*.py"))
    assert modules == ["__init__.py", "settings.py"]


def import_graph() -> dict[str, set[str]]:
    """Each ctxstore module -> the ctxstore modules it imports, wherever the import stands
    (a function-local import counts: it only hides a cycle); imports for type checking
    only do not run and do not count. `from package import module` names the module."""
    modules: dict[str, Path] = {}
    for folder in ("domain", "projections", "adapters", "integrations"):
        for path in (ROOT / folder).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(("ctxstore", *parts)).removesuffix(".__init__")
            modules[name] = path

    parsed = parsed_imports(list(modules.values()))

    def edges(path: Path) -> set[str]:
        found: set[str] = set()
        for module, names, _, checking in parsed[path]:
            if checking:
                continue
            subs = {f"{module}.{n}" for n in names} & modules.keys()
            found.update(subs)
            if len(subs) < len(names) or not names:
                found.add(module)
        return found & modules.keys()

    return {name: edges(path) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle():
    """Modules import in one direction only, function-local imports included."""
    assert cycles(import_graph()) == []


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
