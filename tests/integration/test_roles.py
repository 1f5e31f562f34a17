"""PostgreSQL: an application role that was granted the store's tables, but owns none of
them and may not create in their schema, opens the store its owner created and uses it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from fastapi.testclient import TestClient

from ctxstore.adapters.http import create_app
from ctxstore.adapters.settings import ServiceConfig, Settings
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.domain.errors import StoreUnavailableError
from tests.conftest import make_url

pytestmark = pytest.mark.postgres


@pytest.fixture
def owner_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return make_url("postgres", tmp_path, request)


def _admin(owner_url: str, pg_admin_dsn: str) -> psycopg.Connection[tuple[object, ...]]:
    info = psycopg.conninfo.conninfo_to_dict(pg_admin_dsn)
    info["dbname"] = urlsplit(owner_url).path.strip("/")
    return psycopg.connect(psycopg.conninfo.make_conninfo("", **info), autocommit=True)


@pytest.fixture
def app_role(owner_url: str, pg_admin_dsn: str) -> Iterator[tuple[str, str]]:
    """A login role with no privileges yet, and its URL for the owner's database and schema."""
    role, password = f"ctxstore_app_{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    with _admin(owner_url, pg_admin_dsn) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
    parts = urlsplit(owner_url)
    netloc = f"{role}:{password}@{parts.hostname}:{parts.port or 5432}"
    yield role, urlunsplit(parts._replace(netloc=netloc))
    with _admin(owner_url, pg_admin_dsn) as admin:
        admin.execute(f"DROP OWNED BY {role}")  # its grants in this database
        admin.execute(f"DROP ROLE {role}")


def _grant(owner_url: str, pg_admin_dsn: str, role: str) -> str:
    schema = owner_url.rsplit("schema=", 1)[1]
    with _admin(owner_url, pg_admin_dsn) as admin:
        admin.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO {role}')
        # What README.md tells an operator to grant, and no more.
        admin.execute(
            f"GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON ALL TABLES IN SCHEMA "
            f'"{schema}" TO {role}'
        )
        admin.execute(f'GRANT USAGE ON ALL SEQUENCES IN SCHEMA "{schema}" TO {role}')
    return schema


def test_a_granted_role_uses_the_store_its_owner_created(owner_url, pg_admin_dsn, app_role):
    role, url = app_role
    settings = Settings(actor="app")
    with ContextStore.from_url(owner_url, settings) as owner:
        cid = owner.create(name="made by the owner")
        owner.insert(cid, {"role": "user", "content": "hello"})
    _grant(owner_url, pg_admin_dsn, role)

    with ContextStore.from_url(url, settings) as app:
        app.insert(cid, {"role": "assistant", "content": "hi there"})
        mine = app.create(name="made by the app")
        app.insert(mine, [{"role": "user", "content": f"turn {i}"} for i in range(12)])
        assert [m.content for m in app.visible(cid).messages] == ["hello", "hi there"]
        assert len(app.visible(mine).messages) == 12
        assert app.verify().broken == []
        app.admin.rebuild_audit_index()
        # The HTTP service over it: its idempotency keys' table is the owner's too.
        with TestClient(create_app(app, ServiceConfig(tokens={"tok": "t"}))) as client:
            assert client.get("/health").status_code == 200
        assert {e.context_id for e in app.audit(limit=50).entries} == {cid, mine}
        erased = app.erase(mine, reason="asked to forget")  # VACUUM is the owner's: skipped
        assert [e.context_id for e in app.erasures()] == [mine]
        # The record names each table left unvacuumed, with PostgreSQL's warning.
        unvacuumed = [r for r in erased.residue if "was not vacuumed" in r]
        assert len(unvacuumed) == 5, erased.residue  # events, snapshots, audit, search, keys
        assert all("dead rows" in r and "owner" in r for r in unvacuumed)
        assert app.erasures()[0].residue == erased.residue

    with ContextStore.from_url(owner_url, settings) as owner:  # and the owner sees it all
        assert [m.content for m in owner.visible(cid).messages] == ["hello", "hi there"]
        assert [e.context_id for e in owner.erasures()] == [mine]


def test_a_role_that_cannot_create_the_tables_is_told_so(owner_url, pg_admin_dsn, app_role):
    role, url = app_role
    schema = owner_url.rsplit("schema=", 1)[1]
    with _admin(owner_url, pg_admin_dsn) as admin:
        admin.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO {role}')
    with pytest.raises(StoreUnavailableError, match="permission denied"):
        ContextStore.from_url(url)  # nothing created yet, and it may not create

    with ContextStore.from_url(owner_url):
        pass
    _grant(owner_url, pg_admin_dsn, role)
    with _admin(owner_url, pg_admin_dsn) as admin:
        admin.execute(
            f'DROP TABLE "{schema}".ctxstore_audit'
        )  # as if created by a release before it
    with pytest.raises(StoreUnavailableError, match="ctxstore_audit are missing"):
        ContextStore.from_url(url)
