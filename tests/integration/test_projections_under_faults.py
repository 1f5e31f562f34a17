"""The search index and the audit index under faults: a catch-up interrupted at every step
of its update (each statement, each commit) on SQLite and PostgreSQL — by a process dying
there (the store abandoned, opened anew) or by the database failing there (the same store
goes on) — leaves each index behind but never wrong, and the next catch-up brings it to
exactly what a rebuild from the events gives. An erasure or a history bound committed
between a catch-up's read of the events and its write of the rows leaves no row of what it
removed."""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self

import psycopg
import pytest

from ctxstore.adapters.settings import Settings
from ctxstore.adapters.storage import postgres_audit
from ctxstore.adapters.storage.backend import driver_errors
from ctxstore.adapters.storage.search_index import HEADS, PENDING, POSITION, TABLE
from ctxstore.adapters.store import audit, search
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.domain.errors import CtxStoreError

SETTINGS = Settings(actor="t", snapshot_interval=4)
QUERIES = ["order", "cafe", "mango", "papaya", "filler", "会议", "forked", "gone", "streamed"]


class Killed(BaseException):
    """The process died here: nothing after this point runs (no handler catches it)."""


class Fault:
    """Counts the statements and commits the catch-up's thread sends to the database and
    fails the `at`-th: a kill (Killed) or an outage (the driver's OperationalError)."""

    def __init__(self, at: int | None, kill: bool, driver_error: type[Exception]) -> None:
        self.at, self.kill, self.driver_error = at, kill, driver_error
        self.steps = 0
        self.fired: str | None = None
        self.thread = threading.get_ident()
        self.armed = True

    def step(self, what: str) -> None:
        if not self.armed or threading.get_ident() != self.thread:
            return
        self.steps += 1
        if self.steps == self.at:
            self.fired, self.armed = what, False
            if self.kill:
                raise Killed(what)
            raise self.driver_error(f"fault injected at step {self.at}: {what}")


class _Cursor:
    """A driver cursor whose statements are counted (everything else passes through)."""

    def __init__(self, cursor: Any, fault: Fault) -> None:
        self._cursor, self._fault = cursor, fault

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        self._fault.step(f"execute {str(args or kwargs)[:80]}")
        return self._cursor.execute(*args, **kwargs)

    def executemany(self, *args: Any, **kwargs: Any) -> Any:
        self._fault.step(f"executemany {str(args or kwargs)[:80]}")
        return self._cursor.executemany(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._cursor)

    def __enter__(self) -> Self:
        self._cursor.__enter__()
        return self

    def __exit__(self, *exc: object) -> Any:
        return self._cursor.__exit__(*exc)


class _PgConnection:
    def __init__(self, conn: Any, fault: Fault) -> None:
        self._conn, self._fault = conn, fault

    def cursor(self, *args: Any, **kwargs: Any) -> _Cursor:
        return _Cursor(self._conn.cursor(*args, **kwargs), self._fault)

    @contextmanager
    def transaction(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        with self._conn.transaction(*args, **kwargs) as tx:
            yield tx
            if not kwargs.get("force_rollback"):
                self._fault.step("commit")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


@contextmanager
def faulted(store: ContextStore, fault: Fault) -> Iterator[Fault]:
    """Every database call of `store` (on this thread) counted by `fault`."""
    datastore = store._core.storage.recorder.datastore  # type: ignore[attr-defined]
    if "sqlite" in type(datastore).__name__.lower():
        real = datastore.transaction

        @contextmanager
        def transaction(*, commit: bool) -> Iterator[Any]:
            with real(commit=commit) as c:
                yield _Cursor(c, fault)
                if commit:
                    fault.step("commit")

        datastore.transaction = transaction
        try:
            yield fault
        finally:
            del datastore.transaction
    else:
        real_get = datastore.get_connection

        @contextmanager
        def get_connection(*args: Any, **kwargs: Any) -> Iterator[Any]:
            with real_get(*args, **kwargs) as conn:
                yield _PgConnection(conn, fault)

        datastore.get_connection = get_connection
        try:
            yield fault
        finally:
            del datastore.get_connection


def driver_error(url: str) -> type[Exception]:
    return sqlite3.OperationalError if url.startswith("sqlite") else psycopg.OperationalError


# ---- what the indexes hold, read from their tables ------------------------------------------


def rows(store: ContextStore, sql: str) -> list[tuple[Any, ...]]:
    with store._core.storage.recorder.datastore.transaction(commit=False) as c:  # type: ignore[attr-defined]
        c.execute(sql)
        return [tuple(r.values()) if isinstance(r, dict) else tuple(r) for r in c.fetchall()]


def search_state(store: ContextStore) -> dict[str, Any]:
    """The search index's rows (without their keys), heads, pending contexts and position."""
    return {
        "rows": sorted(rows(store, f"SELECT context_id, message_id, version, role, ts, tenant, "
                                   f"name, body, digest, visible FROM {TABLE}")),
        "heads": dict(rows(store, f"SELECT context_id, version FROM {HEADS}")),
        "pending": sorted(r[0] for r in rows(store, f"SELECT context_id FROM {PENDING}")),
        "position": (rows(store, f"SELECT position FROM {POSITION}") or [(0,)])[0][0],
    }  # fmt: skip


def audit_state(store: ContextStore) -> dict[str, Any]:
    found = rows(store, "SELECT position, context_id, version, type, actor, ts, batch, facts, "
                        "tenant, reverted_by FROM ctxstore_audit ORDER BY position")  # fmt: skip
    return {"rows": found, "position": store._core.storage.audit_index.position()}


def answers(store: ContextStore) -> dict[str, Any]:
    """What reads answer: every query's hits (context, message, version, visibility) and
    the whole audit trail, in order (a rebuild on PostgreSQL numbers positions anew)."""
    found: dict[str, Any] = {}
    for q in QUERIES:
        page = store.search(q, include_hidden=True, limit=100)
        found[q] = sorted((h.context_id.hex, h.message_id, h.version, h.visible) for h in page.hits)
    entries: list[Any] = []
    after: int | str = 0
    while True:
        page_ = store.audit(after=after, limit=7)
        entries += [(e.context_id.hex, e.version, e.type, e.actor) for e in page_.entries]
        if not page_.more:
            break
        after = page_.cursor
    found["audit"] = entries
    return found


def versions(store: ContextStore) -> dict[str, int]:
    """Each context's newest stored version, from the events table."""
    table = store._core.storage.recorder.events_table_name  # type: ignore[attr-defined]
    sql = f"SELECT originator_id, max(originator_version) FROM {table} GROUP BY originator_id"
    return {(c if isinstance(c, str) else c.hex).replace("-", ""): v for c, v in rows(store, sql)}


def assert_behind_never_wrong(
    faulted_search: dict[str, Any], faulted_audit: dict[str, Any],
    rebuilt_search: dict[str, Any], rebuilt_audit: dict[str, Any], newest: dict[str, int],
) -> None:  # fmt: skip
    """What an interrupted catch-up left is part of what a rebuild holds: each row as the
    rebuild has it, each context held at its newest version shown as the rebuild shows it,
    and the position never past a context not yet indexed."""
    rebuilt_rows = {r[:-1]: r[-1] for r in rebuilt_search["rows"]}
    for r in faulted_search["rows"]:
        assert r[:-1] in rebuilt_rows, f"a row the events do not give: {r}"
    for hex_id, head in faulted_search["heads"].items():
        assert head <= newest.get(hex_id, 0), f"{hex_id} held past its newest version"
        if head == newest.get(hex_id) and hex_id not in faulted_search["pending"]:
            held = {r[:-1]: r[-1] for r in faulted_search["rows"] if r[0] == hex_id}
            wanted = {k: v for k, v in rebuilt_rows.items() if k[0] == hex_id}
            assert held == wanted, f"{hex_id} is held current but shows otherwise"
    # Every context the audit index saw change up to the search position is indexed.
    for position, hex_id, version, *_ in faulted_audit["rows"]:
        if position <= faulted_search["position"] and hex_id in newest:
            indexed = faulted_search["heads"].get(hex_id, 0) >= version
            assert indexed or hex_id in faulted_search["pending"], (
                f"position {faulted_search['position']} passed {hex_id} v{version} unindexed"
            )
    # The audit index: the rebuild's first rows, none past its position; a row is marked
    # reverted once the rollback's own row is indexed. (Positions are compared by order:
    # PostgreSQL's index numbers the events it takes, and a rebuild numbers them anew.)
    held = faulted_audit["rows"]
    assert all(r[0] <= faulted_audit["position"] for r in held)
    order = {(r[1], r[2]): i for i, r in enumerate(rebuilt_audit["rows"])}
    prefix = [
        (*r[1:-1], r[-1] if r[-1] is None or order[(r[1], r[-1])] < len(held) else None)
        for r in rebuilt_audit["rows"][: len(held)]
    ]
    assert [r[1:] for r in held] == prefix


# ---- the workload: indexed once, then changed in every way a catch-up handles ------------


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def write_workload(store: ContextStore) -> None:
    """Contexts indexed once, then changed: inserts, a deletion, a replacement, a rolled
    back batch, a fork, a new context, an erased one and a bounded history (pending)."""
    orders = store.create(name="orders")
    ids = store.insert(orders, [user("where is my order 4411"), user("the cafe is closed")]).ids
    kept = store.create(name="kept")
    kept_ids = store.insert(kept, [user("mango kept"), user("papaya dropped")]).ids
    gone = store.create(name="gone")
    store.insert(gone, [user("gone with the erasure 会议")])
    bounded = store.create(name="bounded")
    dropped = store.insert(bounded, [user("papaya bounded"), user("mango bounded")]).ids
    store.delete(bounded, [dropped[0]])
    for i in range(20):  # (a bound trims once 16 events are past it)
        store.insert(bounded, user(f"filler {i}"))
    store.search("order")  # the indexes caught up: the changes below are the next catch-up's
    store.erase(gone, reason="asked")
    store.admin.set_retention(None, keep_latest=3, context_id=bounded, yes=True)
    assert len(store.admin.sweep().trimmed) == 1  # (the audit index caught up again)
    store.insert(bounded, user("mango after the bound"))
    store.insert(orders, [user("order 4412 ships monday"), user("cafe creme")])
    store.delete(orders, [ids[1]])
    store.replace(kept, kept_ids[1], user("papaya replaced"))
    store.batch_start(kept)
    store.insert(kept, [user("mango rolled back")])
    store.batch_end(kept, keep=False)
    store.fork(orders, name="forked")
    fresh = store.create(name="fresh")
    store.insert(fresh, [user("forked thoughts and a cafe"), user("会议记录")])


INDEX_TABLES = (
    "ctxstore_audit", "ctxstore_audit_tracking", "ctxstore_audit_cursor", TABLE, HEADS, POSITION,
    PENDING,
)  # fmt: skip


@pytest.fixture
def copies(
    durable_url: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[[], str]]:
    """Fresh stores holding the workload (its catch-up not yet run): each call a copy."""
    with ContextStore.from_url(durable_url, SETTINGS) as store:
        write_workload(store)
    made: list[str] = []
    if durable_url.startswith("sqlite"):
        origin = Path(durable_url.removeprefix("sqlite:///"))

        def sqlite_copy() -> str:
            folder = tmp_path / f"copy{len(made)}"
            folder.mkdir()
            for f in origin.parent.iterdir():
                if f.name.startswith(origin.name) and not f.name.endswith("-turns"):
                    shutil.copy(f, folder / f.name)
            made.append(str(folder))
            return f"sqlite:///{folder / origin.name}"

        yield sqlite_copy
        return
    # PostgreSQL: a catch-up writes the indexes' tables only, so each copy is the same
    # database with those tables as the workload left them (a database copied per step
    # took ten times as long).
    info = psycopg.conninfo.conninfo_to_dict(request.getfixturevalue("pg_admin_dsn"))
    info["dbname"] = durable_url.partition("?")[0].rsplit("/", 1)[1]
    dsn = psycopg.conninfo.make_conninfo("", **info)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA saved")
        for t in INDEX_TABLES:
            conn.execute(f"CREATE TABLE saved.{t} AS TABLE public.{t}")

    def pg_copy() -> str:
        with psycopg.connect(dsn) as conn:
            for t in INDEX_TABLES:
                conn.execute(f"DELETE FROM public.{t}")
                conn.execute(f"INSERT INTO public.{t} SELECT * FROM saved.{t}")
        return durable_url

    yield pg_copy


@pytest.fixture
def small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pages of a few rows, so a catch-up takes several and advances between them."""
    monkeypatch.setattr(search, "PAGE", 2)
    monkeypatch.setattr(audit, "PROJECT_PAGE", 3)
    # No wait for older transactions to end (PostgreSQL's audit catch-up reads again while
    # one anywhere on the server, another test's, holds its horizon): the same steps each run.
    monkeypatch.setattr(postgres_audit, "WRITE_WAIT", 0)


def opened(url: str) -> ContextStore:
    """A store whose search catch-up never takes its shortcut ("no event since the last"):
    on PostgreSQL the shortcut depends on other transactions in progress (a killed store's
    connection, another test's), and the sweep's steps must be the same every run."""
    store = ContextStore.from_url(url, SETTINGS)
    index = store._core.storage.search_index
    assert index is not None
    index.newest_event = lambda: -1  # type: ignore[method-assign]
    return store


def steps_of(url: str, catch_up: Callable[[Any], Any]) -> int:
    with (
        opened(url) as store,
        faulted(store, Fault(None, kill=True, driver_error=driver_error(url))) as counted,
    ):
        catch_up(store._core)
    return counted.steps


def interrupted(
    url: str, at: int, kill: bool, catch_up: Callable[[Any], Any]
) -> ContextStore | None:
    """A store whose catch-up failed at step `at`; the store to go on with: the same one
    after an outage, another one (the process started anew) after a kill. None when this
    run's catch-up ended before step `at`: PostgreSQL's audit catch-up reads again while a
    transaction anywhere on the server holds its horizon back (another test's), so its
    steps vary between runs."""
    store = opened(url)
    error = driver_error(url)
    # (the outage's error as the driver or the library raise it, or none: the library
    # retried the statement)
    failed = contextlib.suppress(Killed, CtxStoreError, *driver_errors())
    with faulted(store, Fault(at, kill, error)) as fault, failed:
        catch_up(store._core)
    if not fault.fired:
        store.close()
        return None
    if kill:
        store.close()
        store = opened(url)
    return store


def check_after_fault(store: ContextStore) -> None:
    """Behind but never wrong; a catch-up then gives what a rebuild gives."""
    faulted_search, faulted_audit = search_state(store), audit_state(store)
    caught_up = answers(store)
    caught_up_search = search_state(store)
    store.admin.reindex()
    rebuilt = answers(store)
    rebuilt_search, rebuilt_audit = search_state(store), audit_state(store)
    assert caught_up == rebuilt
    position = "position"  # (the audit index's numbering, anew on PostgreSQL's rebuild)
    assert {**caught_up_search, position: 0} == {**rebuilt_search, position: 0}
    assert_behind_never_wrong(
        faulted_search, faulted_audit, rebuilt_search, rebuilt_audit, versions(store)
    )


CATCH_UPS = {"search": search.catch_up, "audit": audit.catch_up}


# The suite interrupts every step of a short catch-up and an even spread of a long one's
# (its first and last among them): every step of each is ~7 minutes of a machine's time.
# CTXSTORE_EVERY_STEP=1 runs them all.
SPREAD = 40


def chosen_steps(total: int) -> list[int]:
    if os.environ.get("CTXSTORE_EVERY_STEP") or total <= SPREAD:
        return list(range(1, total + 1))
    stride = -(-total // SPREAD)
    return sorted({*range(1, total + 1, stride), total})


@pytest.mark.slow  # (a few hundred catch-ups, each checked against a rebuild)
@pytest.mark.parametrize("kill", [True, False], ids=["killed", "outage"])
@pytest.mark.parametrize("index", sorted(CATCH_UPS))
def test_a_catch_up_interrupted_at_every_step_is_behind_never_wrong(
    copies, small_pages, index, kill
):
    """Every statement and commit of a catch-up (the search index's runs the audit index's
    first), each in turn the one where the process dies or the database fails."""
    catch_up = CATCH_UPS[index]
    # (the fewest of three runs: on PostgreSQL a run reads more while another test's
    # transaction holds the horizon back, and a step past the usual count is not reached)
    total = 0
    for _ in range(20):  # (a run the horizon held back entirely: wait for it, count again)
        total = min(steps_of(copies(), catch_up) for _ in range(3))
        if total > 10:
            break
        time.sleep(0.5)
    assert total > 10
    for at in chosen_steps(total):
        for _ in range(5):  # (a run another test's transaction shortened: run it again)
            store = interrupted(copies(), at, kill, catch_up)
            if store is not None:
                break
        assert store is not None, f"step {at} was not reached"
        try:
            check_after_fault(store)
        except AssertionError as exc:
            raise AssertionError(f"after a fault at step {at} of {total}: {exc}") from exc
        finally:
            store.close()


# ---- an erasure or a history bound between a catch-up's read and its write ----------------


@contextmanager
def before_the_rows_are_stored(store: ContextStore, act: Callable[[], Any]) -> Iterator[list[str]]:
    """`act` (another process's erasure or sweep) runs once the catch-up has read a
    context's events and before it stores their rows; yields the contexts it ran before."""
    index = store._core.storage.search_index
    assert index is not None
    real = index.store
    ran: list[str] = []

    def store_rows(context_hex: str, *args: Any, **kwargs: Any) -> Any:
        if not ran:
            ran.append(context_hex)
            act()
        return real(context_hex, *args, **kwargs)

    index.store = store_rows  # type: ignore[method-assign]
    try:
        yield ran
    finally:
        del index.store


def search_rows_of(store: ContextStore, hex_id: str) -> dict[str, list[Any]]:
    found = {}
    for table, columns in ((TABLE, "version, body"), (HEADS, "version"), (PENDING, "1")):
        found[table] = rows(store, f"SELECT {columns} FROM {table} WHERE context_id = '{hex_id}'")
    return found


def test_an_erasure_between_reading_events_and_storing_rows_leaves_no_row(durable_url):
    with (
        ContextStore.from_url(durable_url, SETTINGS) as store,
        ContextStore.from_url(durable_url, SETTINGS) as other,
    ):
        gone = store.create(name="gone")
        store.insert(gone, [user("xylophone secret"), user("会议 secret")])
        store.search("xylophone")  # indexed once: the erasure races an update of its rows
        store.insert(gone, [user("xylophone again")])
        with before_the_rows_are_stored(store, lambda: other.erase(gone, reason="asked")) as ran:
            found = store.search("xylophone", include_hidden=True).hits
        assert ran == [gone.hex]
        assert found == []
        assert search_rows_of(store, gone.hex) == {TABLE: [], HEADS: [], PENDING: []}
        assert store.search("会议", include_hidden=True).hits == []


def test_a_history_bound_between_reading_events_and_storing_rows_leaves_no_removed_row(
    durable_url,
):
    """A sweep removes versions the catch-up has just read: their rows are not written
    back, and the context is indexed anew from what it kept (its visible messages found,
    as a rebuild finds them)."""
    with (
        ContextStore.from_url(durable_url, SETTINGS) as store,
        ContextStore.from_url(durable_url, SETTINGS) as other,
    ):
        cid = store.create(name="bounded")
        ids = store.insert(cid, [user("mango kept"), user("papaya dropped")]).ids
        store.delete(cid, [ids[1]])
        for i in range(20):  # (a bound trims once 16 events are past it)
            store.insert(cid, user(f"filler {i}"))
        store.admin.set_retention(None, keep_latest=3, context_id=cid, yes=True)
        with before_the_rows_are_stored(store, lambda: other.admin.sweep()) as ran:
            store.search("papaya", include_hidden=True)
        assert ran == [cid.hex]
        held = search_rows_of(store, cid.hex)
        first_kept = min(v for v in versions_of(store, cid.hex) if v > 1)
        assert [r for r in held[TABLE] if 1 < r[0] < first_kept] == [], "rows of removed versions"
        assert store.search("papaya", include_hidden=True).hits == []
        assert [h.visible for h in store.search("mango").hits] == [True]
        assert len(store.search("filler", limit=100).hits) == 20
        caught_up = answers(store)
        store.admin.reindex()
        assert answers(store) == caught_up


def versions_of(store: ContextStore, hex_id: str) -> list[int]:
    table = store._core.storage.recorder.events_table_name  # type: ignore[attr-defined]
    found = rows(store, f"SELECT originator_version FROM {table} WHERE "
                        f"replace(CAST(originator_id AS TEXT), '-', '') = '{hex_id}'")  # fmt: skip
    return sorted(r[0] for r in found)


def test_a_catch_up_storing_after_a_newer_one_keeps_what_the_context_shows_now(durable_url):
    """Two catch-ups (a search here, the service's refresher or another process there)
    index one context: the older read stores last. It must not put back what the context
    showed before under the newer head (a deleted message found as shown, for good)."""
    with (
        ContextStore.from_url(durable_url, SETTINGS) as store,
        ContextStore.from_url(durable_url, SETTINGS) as other,
    ):
        cid = store.create(name="raced")
        store.insert(cid, [user("walnut first")])
        store.search("walnut")
        gone = store.insert(cid, [user("walnut deleted soon")]).ids

        def newer_catch_up() -> None:
            other.delete(cid, gone)
            other.search("walnut")

        with before_the_rows_are_stored(store, newer_catch_up):
            store.search("walnut")
        shown = sorted(h.snippet for h in store.search("walnut").hits)
        assert shown == ["«walnut» first"]
        caught_up = answers(store)
        store.admin.reindex()
        assert answers(store) == caught_up
