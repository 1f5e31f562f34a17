"""Versioned schema: a store at the current version runs no DDL; one written by release 0.1
(no versions recorded) upgrades in place and reads as that release showed it; a newer
schema is refused; `setup` and `ctxstore migrate` apply what is missing."""

import json
import shutil
import sqlite3
import subprocess
import uuid
from pathlib import Path

import psycopg
import pytest
from eventsourcing.sqlite import SQLiteAggregateRecorder

from ctxstore.adapters.settings import Settings
from ctxstore.adapters.storage import migrations
from ctxstore.adapters.storage.postgres import PostgresBackend
from ctxstore.adapters.storage.sqlite import SQLiteBackend
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.domain.errors import StoreUnavailableError

from ..conftest import DURABLE_BACKENDS, make_url

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
EXPECTED = json.loads((FIXTURES / "release_0_1.json").read_text())
TOPIC_PREFIX = "ctxstore.domain.context:Context."


@pytest.fixture(params=DURABLE_BACKENDS)
def durable_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store not yet migrated (on PostgreSQL an empty schema, not the migrated copy)."""
    return make_url(request.param, tmp_path, request, migrated=False)


def latest(url: str) -> int:
    """This release's schema version on the URL's backend (each has its own migrations)."""
    backend = SQLiteBackend if url.startswith("sqlite") else PostgresBackend
    return migrations.current(backend.migrations)


def test_a_new_store_records_its_schema_version(durable_url):
    with ContextStore.from_url(durable_url) as store:
        assert [m.version for m in store._storage.applied] == list(
            range(1, latest(durable_url) + 1)
        )
        assert store.admin.schema_version() == latest(durable_url)
    with ContextStore.from_url(durable_url) as store:
        assert store._storage.applied == []


def test_opening_a_store_at_the_current_version_runs_no_ddl(durable_url, monkeypatch):
    ContextStore.from_url(durable_url).close()

    def refuse(*args, **kwargs):
        raise AssertionError("DDL ran on a store at the current version")

    for backend in (SQLiteBackend, PostgresBackend):
        monkeypatch.setattr(backend, "record_version", refuse)
    monkeypatch.setattr(SQLiteAggregateRecorder, "create_table", refuse)
    monkeypatch.setattr("eventsourcing.postgres.PostgresAggregateRecorder.create_table", refuse)
    monkeypatch.setattr("eventsourcing.postgres.PostgresTrackingRecorder.create_table", refuse)
    monkeypatch.setattr("eventsourcing.sqlite.SQLiteTrackingRecorder.create_table", refuse)
    with ContextStore.from_url(durable_url) as store:
        cid = store.create()
        store.insert(cid, [{"role": "user", "content": "hi"}])
        assert store.audit(context_id=cid).entries


def _set_version(url, version):
    if url.startswith("sqlite"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as c:
            c.execute(
                "INSERT INTO ctxstore_migrations VALUES (?, 'from the future', 0)", (version,)
            )
        return
    base, schema = url.split("?schema=")
    with psycopg.connect(base, autocommit=True) as c:
        c.execute(f'INSERT INTO "{schema}".ctxstore_migrations VALUES (%s, %s, 0)', (version, "x"))


def test_a_schema_newer_than_this_release_is_refused(durable_url):
    ContextStore.from_url(durable_url).close()
    _set_version(durable_url, 99)
    newer = f"version 99, newer than this release's {latest(durable_url)}"
    with pytest.raises(StoreUnavailableError, match=newer):
        ContextStore.from_url(durable_url)


def test_an_outdated_schema_is_refused_when_migrating_is_not_allowed(durable_url, monkeypatch):
    ContextStore.from_url(durable_url).close()
    version = latest(durable_url) + 1
    later = migrations.Migration(version, "a later change", lambda backend, events, snap: None)
    for backend in (SQLiteBackend, PostgresBackend):
        monkeypatch.setattr(backend, "migrations", (*backend.migrations, later))
    with pytest.raises(StoreUnavailableError, match="run `ctxstore migrate`"):
        ContextStore.from_url(durable_url, migrate=False)
    applied = ContextStore.setup(durable_url)  # what `ctxstore migrate` runs
    assert [m.version for m in applied] == [version]
    with ContextStore.from_url(durable_url, migrate=False) as store:
        assert store.admin.schema_version() == version


def _check_release_store(store: ContextStore, expected: dict) -> None:
    applied = [m.version for m in store._storage.applied]
    assert applied == list(range(1, latest(store.url) + 1))  # upgraded in place
    for cid, seen in expected.items():
        if cid in ("erased", "audit_events"):
            continue
        visible = store.visible(cid).model_dump(mode="json")
        assert visible == seen["visible"]
        # Events that release stored carry no command id (a field added since).
        history = [h.model_dump(mode="json") for h in store.history(cid)]
        assert all(h.pop("command_id") is None for h in history)
        assert history == seen["history"]
        exported = [json.loads(line) for line in store.export_events(cid)][:-1]  # the trailer
        assert all(e["topic"].startswith(TOPIC_PREFIX) for e in exported)  # topics unchanged
    assert store.verify().ok
    assert [e.context_id for e in store.erasures()] == [uuid.UUID(expected["erased"])]
    assert len(store.audit(limit=1000).entries) == expected["audit_events"]
    claimed = store.admin.idempotency_keys(10**10, 60).claim("acme", "key-1", "fingerprint")  # kept
    assert claimed is not None and claimed.status == 200  # the service's stored response
    cid = next(c for c in expected if c not in ("erased", "audit_events"))
    w = store.insert(cid, [{"role": "user", "content": "after the upgrade"}])
    assert store.verify(cid).ok and w.version == len(expected[cid]["history"]) + 1


def test_a_sqlite_store_written_by_release_0_1_upgrades_in_place(tmp_path):
    db = tmp_path / "release.db"
    shutil.copy(FIXTURES / "release_0_1.db", db)
    tables = {r[0] for r in sqlite3.connect(db).execute("SELECT name FROM sqlite_master")}
    assert "ctxstore_migrations" not in tables
    with ContextStore.from_url(f"sqlite:///{db}", Settings(actor="t")) as store:
        _check_release_store(store, EXPECTED["sqlite"])


@pytest.mark.postgres
def test_a_postgres_store_written_by_release_0_1_upgrades_in_place(pg_url):
    schema = f"r_{uuid.uuid4().hex[:10]}"
    dump = (FIXTURES / "release_0_1.pg.sql").read_text().replace("release_0_1", schema)
    restored = subprocess.run(  # the plain-SQL dump has COPY blocks: psql restores it
        ["psql", "-q", "-v", "ON_ERROR_STOP=1", pg_url], input=dump, capture_output=True,
        text=True, check=False,
    )  # fmt: skip
    assert restored.returncode == 0, restored.stderr
    with ContextStore.from_url(f"{pg_url}?schema={schema}", Settings(actor="t")) as store:
        _check_release_store(store, EXPECTED["postgres"])
    # The upgraded insert function takes no table lock and sends no NOTIFY of its own
    # (migration 9 and 10); it refuses contexts moved to another server.
    with psycopg.connect(pg_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT pg_get_functiondef(p.oid) FROM pg_proc p JOIN pg_namespace n ON "
            "n.oid = p.pronamespace WHERE n.nspname = %s AND p.proname LIKE %s",
            (schema, "%insert_events%"),
        ).fetchone()
    assert row is not None
    assert "LOCK TABLE" not in row[0] and "NOTIFY" not in row[0] and "ctxstore_moved" in row[0]
