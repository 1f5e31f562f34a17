"""Store URLs: libpq parameters reach every PostgreSQL connection (none dropped, unknown
ones refused), SQLite URLs as SQLAlchemy spells them, and reads that create nothing."""

import uuid
from pathlib import Path

import pytest

from ctxstore import StoreUnavailableError, StoreURLError
from ctxstore.adapters.storage.urls import library_env
from ctxstore.adapters.store.facade import ContextStore


@pytest.mark.postgres
def test_libpq_parameters_reach_the_connections(pg_url):
    name = f"ctxstore-{uuid.uuid4().hex[:8]}"
    with ContextStore.from_url(f"{pg_url}?application_name={name}&connect_timeout=4") as store:
        store.create()
        with store._storage.recorder.datastore.get_connection() as conn:
            row = conn.execute("SELECT current_setting('application_name') AS a").fetchone()
            assert row["a"] == name


@pytest.mark.postgres
def test_sslmode_is_never_dropped(pg_url):
    """The test server speaks no SSL: verify-full must refuse, never connect in plaintext."""
    with pytest.raises(StoreUnavailableError, match="SSL"):
        ContextStore.from_url(f"{pg_url}?sslmode=verify-full")


@pytest.mark.postgres
def test_a_socket_folder_as_host(pg_url):
    sockets = Path("/var/run/postgresql")
    if not any(sockets.glob(".s.PGSQL.*")):
        pytest.skip("no PostgreSQL socket in /var/run/postgresql")
    with ContextStore.from_url(f"{pg_url}?host={sockets}") as store:
        assert store.visible(store.create()).version == 1


def test_unknown_postgres_parameters_are_refused():
    with pytest.raises(StoreURLError, match="sslmod"):
        library_env("postgresql://u@h/db?sslmod=require")
    env = library_env("postgresql://u@h/db?schema=s&sslmode=require&sslrootcert=/ca.pem")
    assert env["POSTGRES_SCHEMA"] == "s"
    assert (
        '"sslmode": "require"' in env["CTXSTORE_LIBPQ"] and "sslrootcert" in env["CTXSTORE_LIBPQ"]
    )


def test_sqlite_urls_as_sqlalchemy_spells_them(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert library_env("sqlite:///rel.db")["SQLITE_DBNAME"] == "rel.db"
    assert library_env(f"sqlite:///{tmp_path}/abs.db")["SQLITE_DBNAME"] == f"{tmp_path}/abs.db"
    assert library_env("sqlite:///:memory:")["SQLITE_DBNAME"] == ":memory:"
    for wrong, hint in [("sqlite:rel.db", "sqlite:///rel.db"), ("sqlite://host/x.db", "three"),
                        ("sqlite://", "no file")]:  # fmt: skip
        with pytest.raises(StoreURLError, match=hint):
            library_env(wrong)
    assert not list(tmp_path.iterdir())  # nothing made


def test_a_read_on_a_mistyped_path_creates_nothing(tmp_path):
    url = f"sqlite:///{tmp_path / 'typo' / 'store.db'}"
    with pytest.raises(StoreURLError, match="no store at"):
        ContextStore.from_url(url, create=False)
    assert not (tmp_path / "typo").exists()
