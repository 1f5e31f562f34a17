"""Shared fixtures: one store fixture covers memory, SQLite and PostgreSQL."""

from __future__ import annotations

import os
import queue
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import settings as hypothesis_settings

from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.adapters.store.parts import parts_of

# Hypothesis profiles: `ci` (the default: the whole suite, CI) runs every property test at
# its full count; `dev` (`--hypothesis-profile=dev`, the fast tier) at a fifth.
hypothesis_settings.register_profile("ci", max_examples=100, deadline=None)
hypothesis_settings.register_profile("dev", max_examples=20, deadline=None)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def examples(full: int) -> int:
    """A property test's example count under the loaded profile (`full` under `ci`)."""
    loaded = hypothesis_settings.default
    return max(3, full * (100 if loaded is None else loaded.max_examples) // 100)


# Where the environment says PYTHONDONTWRITEBYTECODE, every test process (and each CLI
# process a test starts) would compile ctxstore and rewrite the test modules anew: keep the
# bytecode cache for the suite's own processes (it is git-ignored).
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

DEFAULT_DSN = "host=127.0.0.1 port=5432 user=postgres dbname=postgres connect_timeout=3"


@pytest.fixture(scope="session")
def pg_admin_dsn() -> str:
    """A DSN of a PostgreSQL server that may create databases; skips (fails in CI) without one."""
    dsn = os.environ.get("CTXSTORE_TEST_DSN", DEFAULT_DSN)
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        reason = f"no PostgreSQL at {dsn!r} ({exc.__class__.__name__}); set CTXSTORE_TEST_DSN"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the PostgreSQL tests: {reason}")
        pytest.skip(reason)
    return dsn


@pytest.fixture(scope="session")
def pg_url(pg_admin_dsn: str) -> Iterator[str]:
    """A fresh database for this test session, dropped afterwards; as a store URL."""
    name = f"ctxstore_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    info = psycopg.conninfo.conninfo_to_dict(pg_admin_dsn)
    host, port, user = (
        info.get("host", "127.0.0.1"),
        info.get("port", "5432"),
        info.get("user", "postgres"),
    )
    password = info.get("password")
    auth = f"{user}:{password}" if password else f"{user}"
    yield f"postgresql://{auth}@{host}:{port}/{name}"
    with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class PgTemplate:
    """A database migrated once per test session; each test's database is a copy of it
    (CREATE DATABASE ... TEMPLATE: a file copy, faster than migrating), dropped at the end."""

    def __init__(self, admin: str) -> None:
        self.admin = admin
        self.name = f"ctxstore_tpl_{uuid.uuid4().hex[:12]}"
        self.copies: list[str] = []
        info = psycopg.conninfo.conninfo_to_dict(admin)
        password = info.get("password")
        auth = (
            f"{info.get('user', 'postgres')}:{password}"
            if password
            else info.get("user", "postgres")
        )
        self.base = (
            f"postgresql://{auth}@{info.get('host', '127.0.0.1')}:{info.get('port', '5432')}"
        )
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{self.name}"')
        ContextStore.setup(f"{self.base}/{self.name}?schema=public")
        # A test's copy is dropped on a thread of its own once the test is done, while the
        # next tests run (dropping hundreds at the session's end took 30-55 s a worker).
        self.released: queue.Queue[str | None] = queue.Queue()
        self.dropper = threading.Thread(target=self._drop_released, daemon=True)
        self.dropper.start()

    def copy(self) -> str:
        name = f"ctxstore_t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{self.name}"')
        self.copies.append(name)
        return f"{self.base}/{name}?schema=public"

    def release(self, url: str) -> None:
        """The test that had this copy is done with it."""
        self.released.put(url.rsplit("/", 1)[1].split("?")[0])

    def _drop_released(self) -> None:
        with psycopg.connect(self.admin, autocommit=True) as conn:
            while (name := self.released.get()) is not None:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def drop(self) -> None:
        self.released.put(None)
        self.dropper.join()
        with psycopg.connect(self.admin, autocommit=True) as conn:
            for name in [*self.copies, self.name]:  # (released ones are gone: IF EXISTS)
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def pg_template(pg_admin_dsn: str) -> Iterator[PgTemplate]:
    template = PgTemplate(pg_admin_dsn)
    yield template
    template.drop()


def make_url(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest, *, migrated: bool = True
) -> str:
    """A fresh store's URL: memory, a SQLite file, or on PostgreSQL a copy of the session's
    migrated template database (`migrated=False`: an empty schema, for migration tests)."""
    if kind == "memory":
        return "memory://"
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'events.db'}"
    if migrated:
        template: PgTemplate = request.getfixturevalue("pg_template")
        url = template.copy()
        request.addfinalizer(lambda: template.release(url))
        return url
    base: str = request.getfixturevalue("pg_url")
    # One schema per test keeps tests independent inside the session's database.
    schema = f"t_{uuid.uuid4().hex[:10]}"
    admin = request.getfixturevalue("pg_admin_dsn")
    info = psycopg.conninfo.conninfo_to_dict(admin)
    info["dbname"] = base.rsplit("/", 1)[1]
    with psycopg.connect(psycopg.conninfo.make_conninfo("", **info), autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    return f"{base}?schema={schema}"


BACKENDS = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
DURABLE_BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return make_url(request.param, tmp_path, request)


@pytest.fixture(params=DURABLE_BACKENDS)
def durable_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return make_url(request.param, tmp_path, request)


@pytest.fixture
def store(store_url: str) -> Iterator[ContextStore]:
    with ContextStore.from_url(store_url, Settings(snapshot_interval=5, actor="tester")) as s:
        yield s


# ---- tiers: `pytest -m "not slow"` is the everyday run; CI runs everything ----------------

# Where the fast tier still runs PostgreSQL: every surface against one script, and the
# write ladder's own cases. Every other PostgreSQL variant runs in the whole suite only.
FAST_ON_POSTGRES = ("test_conformance.py", "test_write_ladder.py", "test_commit_point.py")
# The SDKs' own suites run on the store over SQLite in the fast tier; over the async store,
# the HTTP client and PostgreSQL in the whole suite (the conformance script covers those
# surfaces in both).
SURFACE_VARIANTS = ("async", "http", "postgres")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    slow = pytest.mark.slow
    for item in items:
        if item.get_closest_marker("slow"):
            continue
        path = str(item.path)
        params = item.name.partition("[")[2]
        if (
            item.get_closest_marker("postgres")
            and not path.endswith(FAST_ON_POSTGRES)
            or ("/tests/integrations/" in path or "/tests/sdk/" in path)
            and any(v in params for v in SURFACE_VARIANTS)
        ):
            item.add_marker(slow)
    # The browser tests go first: each worker's Chromium and the services it drives then
    # start on a fresh worker, not after hundreds of tests have loaded it (a whole run on
    # two cores left them too slow to answer within their waits).
    items.sort(key=lambda item: "/tests/web/" not in str(item.path))


# ---- the service, and each surface over one store -------------------------------------------

TENANT_TOKENS = {"token-acme": "acme", "token-globex": "globex"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def served(
    store: Any, config: Any = None, tail: Any = None
) -> Iterator[str]:  # a ContextStore or a ShardedStore
    """The HTTP service over `store` on a loopback port (uvicorn in a thread): its URL."""
    import uvicorn

    from ctxstore.adapters.http import create_app
    from ctxstore.adapters.settings import ServiceConfig

    config = config or ServiceConfig(tokens=TENANT_TOKENS, audit_refresh_seconds=0.2)
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(store, config, tail=tail), host="127.0.0.1", port=port,
            log_level="warning", timeout_graceful_shutdown=1,
        )
    )  # fmt: skip
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the service did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


SURFACES = ["store", "async", "http"]  # in process, awaited, a tenant's client over HTTP


@contextmanager
def surface_over(kind: str, store: ContextStore) -> Iterator[Any]:
    """`store` as a surface: itself, the async store over it (the same storage and cache),
    or the HTTP client of a tenant's token to a service over it."""
    if kind == "store":
        yield store
    elif kind == "async":
        from ctxstore.adapters.store.async_store import AsyncContextStore

        events = parts_of(store).storage.async_events()
        yield AsyncContextStore(store, events)
        events.discard()
    else:
        from ctxstore.adapters.http.client import CtxStoreClient

        with served(store) as url, CtxStoreClient(url, token="token-acme") as client:
            yield client


# ---- a plain reference model of the visible context, for property tests -----------------


class ReferenceModel:
    """The visible context as a plain list, with batches as copies of that list.

    Written independently of the domain code: it decides validity from the definition of a
    well-formed transcript, not from the aggregate's checks.
    """

    def __init__(self) -> None:
        self.items: list[tuple[str, dict]] = []
        self.saved: list[list[tuple[str, dict]]] = []
        self.covers: dict[str, list[tuple[str, dict]]] = {}  # summary id -> what it replaced

    @property
    def batch(self) -> int:
        return len(self.saved)

    def ids(self) -> list[str]:
        return [i for i, _ in self.items]

    @staticmethod
    def well_formed(items: list[tuple[str, dict]]) -> bool:
        for i, (_, m) in enumerate(items):
            if m["role"] == "tool":
                j = i - 1
                while j >= 0 and items[j][1]["role"] == "tool":
                    j -= 1
                if j < 0:
                    return False
                head = items[j][1]
                calls = [c["id"] for c in head.get("tool_calls") or []]
                if m["tool_call_id"] not in calls:
                    return False
                if any(items[k][1]["tool_call_id"] == m["tool_call_id"] for k in range(j + 1, i)):
                    return False
            elif m["role"] == "assistant" and m.get("tool_calls"):
                k = i + 1
                answered = set()
                while k < len(items) and items[k][1]["role"] == "tool":
                    answered.add(items[k][1]["tool_call_id"])
                    k += 1
                if k < len(items) and not {c["id"] for c in m["tool_calls"]} <= answered:
                    return False
        return True

    def block(self, idx: int) -> list[int]:
        """Indices of the call/results block holding items[idx] (empty if none)."""
        j = idx
        while j >= 0 and self.items[j][1]["role"] == "tool":
            j -= 1
        if j < 0 or not self.items[j][1].get("tool_calls"):
            return []
        k = j + 1
        while k < len(self.items) and self.items[k][1]["role"] == "tool":
            k += 1
        return list(range(j, k))

    def apply(self, op: tuple) -> str | None:
        """Apply op if valid; return the name of the expected error class otherwise."""
        kind = op[0]
        ids = self.ids()
        in_use = set(ids) | {i for s in self.saved for i, _ in s}
        if kind == "insert":
            _, msgs, after = op
            if after is not None and after not in ids:
                return "UnknownMessageError"
            if any(m["id"] in in_use for m in msgs):
                return "InvalidOperationError"
            at = len(ids) if after is None else ids.index(after) + 1
            new = self.items[:at] + [(m["id"], m) for m in msgs] + self.items[at:]
            if not self.well_formed(new):
                return "MalformedTranscriptError"
            self.items = new
            for m in msgs:
                self.covers.pop(m["id"], None)
        elif kind in ("delete", "compress"):
            refs = op[1]
            if not refs:
                return "InvalidOperationError"
            if any(r not in ids for r in refs):
                return "UnknownMessageError"
            if len(set(refs)) != len(refs):
                return "InvalidOperationError"
            pos = sorted(ids.index(r) for r in refs)
            if kind == "compress" and pos[-1] - pos[0] + 1 != len(pos):
                return "InvalidOperationError"
            for p in pos:
                if not set(self.block(p)) <= set(pos):
                    return "MalformedTranscriptError"
            if kind == "delete":
                new = [it for n, it in enumerate(self.items) if n not in pos]
            else:
                summary = op[2]
                if summary["id"] in in_use:
                    return "InvalidOperationError"
                new = self.items[: pos[0]] + [(summary["id"], summary)] + self.items[pos[-1] + 1 :]
            if not self.well_formed(new):
                return "MalformedTranscriptError"
            if kind == "compress":
                self.covers[summary["id"]] = self.items[pos[0] : pos[-1] + 1]
            self.items = new
        elif kind == "expand":
            ref = op[1]
            if ref not in ids:
                return "UnknownMessageError"
            if ref not in self.covers:
                return "InvalidOperationError"  # not a summary
            covered = self.covers[ref]
            if any(i in ids for i, _ in covered):
                return "InvalidOperationError"  # a covered message is visible again
            at = ids.index(ref)
            new = self.items[:at] + covered + self.items[at + 1 :]
            if not self.well_formed(new):
                return "MalformedTranscriptError"
            self.items = new
        elif kind == "replace":
            _, ref, msg = op
            if ref not in ids:
                return "UnknownMessageError"
            new = [(i, {**msg, "id": i} if i == ref else m) for i, m in self.items]
            if not self.well_formed(new):
                return "MalformedTranscriptError"
            self.items = new
        elif kind == "batch_start":
            self.saved.append(list(self.items))
        elif kind == "batch_end":
            _, to, keep = op
            if self.batch == 0 or not 0 <= to < self.batch:
                return "UnknownBatchError"
            if not keep:
                self.items = list(self.saved[to])
            del self.saved[to:]
        return None


@pytest.fixture
def reference_model() -> type[ReferenceModel]:
    return ReferenceModel


def draw_op(data, model: ReferenceModel, counter: list[int]) -> tuple:
    """Draw one operation, mostly valid, sometimes not, from the model's current state."""
    from hypothesis import strategies as st

    def fresh(prefix: str) -> str:
        counter[0] += 1
        return f"{prefix}{counter[0]}"

    ids = model.ids()
    pending: list[str] = []
    if model.items:
        # Calls of the tail block still waiting for a result.
        j = len(model.items) - 1
        answered = set()
        while j >= 0 and model.items[j][1]["role"] == "tool":
            answered.add(model.items[j][1]["tool_call_id"])
            j -= 1
        if j >= 0 and model.items[j][1].get("tool_calls"):
            pending = [c["id"] for c in model.items[j][1]["tool_calls"] if c["id"] not in answered]

    def message() -> dict:
        if pending and data.draw(st.booleans()):
            return {
                "id": fresh("m"),
                "role": "tool",
                "tool_call_id": data.draw(st.sampled_from(pending)),
                "content": "r",
            }
        kind = data.draw(
            st.sampled_from(["user", "system", "assistant", "calls", "calls", "stray"])
        )
        if kind == "calls":
            n = data.draw(st.integers(1, 2))
            return {
                "id": fresh("m"),
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": fresh("c"),
                        "type": "function",
                        "function": {"name": "f", "arguments": "{}"},
                    }
                    for _ in range(n)
                ],
            }
        if kind == "stray":
            return {"id": fresh("m"), "role": "tool", "tool_call_id": fresh("c"), "content": "?"}
        return {"id": fresh("m"), "role": kind, "content": fresh("t")}

    def ref() -> str:
        if ids and data.draw(st.integers(0, 9)) > 0:
            return data.draw(st.sampled_from(ids))
        return "missing"

    kind = data.draw(
        st.sampled_from(
            ["insert"] * 6
            + [
                "insert_after",
                "delete",
                "delete",
                "replace",
                "compress",
                "compress",
                "expand",
                "expand",
                "batch_start",
                "batch_start",
                "batch_end",
                "batch_end",
            ]
        )
    )
    if kind == "insert":
        msgs = [message()]
        if pending and data.draw(st.booleans()):
            msgs += [
                {"id": fresh("m"), "role": "tool", "tool_call_id": c, "content": "r"}
                for c in pending
                if c != msgs[0].get("tool_call_id")
            ]
            pending.clear()
        return ("insert", msgs, None)
    if kind == "insert_after":
        return ("insert", [message()], ref())
    if kind == "delete":
        if not ids:
            return ("delete", [ref()])
        start = data.draw(st.integers(0, len(ids) - 1))
        return ("delete", ids[start : start + data.draw(st.integers(1, 3))])
    if kind == "replace":
        target = ref()
        current = dict(model.items)[target] if target in ids else {"role": "user"}
        new = dict(current) if current["role"] != "user" else {"role": "user"}
        new.pop("id", None)
        if data.draw(st.integers(0, 2)) == 0:
            new = message()  # a different shape: may break a call/result pair
            new.pop("id")
        elif new["role"] in ("tool", "user", "system", "developer") or "content" in new:
            new["content"] = fresh("edited")
        return ("replace", target, new)
    if kind == "compress":
        if not ids:
            return ("compress", [ref()], {"id": fresh("s"), "role": "user", "content": "s"})
        start = data.draw(st.integers(0, len(ids) - 1))
        run = ids[start : start + data.draw(st.integers(1, 4))]
        if data.draw(st.integers(0, 5)) == 0 and len(ids) > 2:
            run = [ids[0], ids[-1]]  # usually not contiguous
        return ("compress", run, {"id": fresh("s"), "role": "user", "content": fresh("summary")})
    if kind == "expand":
        summaries = [i for i in ids if i in model.covers]
        if summaries and data.draw(st.integers(0, 5)) > 0:
            return ("expand", data.draw(st.sampled_from(summaries)))
        return ("expand", ref())
    if kind == "batch_start":
        return ("batch_start",)
    return ("batch_end", data.draw(st.integers(-1, model.batch)), data.draw(st.booleans()))


@pytest.fixture
def draw_operation():
    return draw_op


def apply_op(store, cid, op):
    """Run one drawn operation on a store; returns what it wrote."""
    kind = op[0]
    if kind == "insert":
        return store.insert(cid, op[1], after=op[2])
    if kind == "delete":
        return store.delete(cid, op[1])
    if kind == "replace":
        return store.replace(cid, op[1], op[2])
    if kind == "compress":
        return store.compress(cid, op[1], op[2])
    if kind == "expand":
        return store.expand(cid, op[1])
    if kind == "batch_start":
        return store.batch_start(cid)
    return store.batch_end(cid, to=op[1], keep=op[2])


@pytest.fixture
def apply_operation():
    return apply_op


@pytest.fixture
def fake_provider():
    """A local fake model provider that records the bodies it receives (tests/fake_provider.py)."""
    from tests.fake_provider import FakeProvider

    provider = FakeProvider()
    yield provider
    provider.close()


# ---- a user who cannot write a store (read-only media, for real) ---------------------------

NOBODY = 65534


@pytest.fixture
def shared_folder() -> Iterator[Path]:
    """A folder any user can reach (pytest's tmp_path is its owner's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="ctxstore-ro-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        for path in (folder, *folder.iterdir()):
            path.chmod(0o755)
        shutil.rmtree(folder)


def as_reader(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """A command run by a user who may not write the store: this one, or (as root) nobody."""
    drop = [] if os.geteuid() != 0 else ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}",
                                         "--clear-groups"]  # fmt: skip
    return subprocess.run(
        [*drop, sys.executable, *args], capture_output=True, text=True, timeout=120,
        check=False, env=env,
    )  # fmt: skip
