"""PostgreSQL URLs naming several hosts, as libpq takes them: `h1:p1,h2:p2` in the URL
(the form users write), or `?host=h1,h2&port=p1,p2`; libpq tries them in order and
`target_session_attrs=read-write` picks the primary."""

from __future__ import annotations

import socket
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from ctxstore.adapters.storage.urls import library_env
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.domain.errors import StoreURLError
from tests.conftest import make_url


def test_every_host_list_libpq_reads_is_parsed():
    env = library_env("postgresql://u:pw@h1:5433,h2:5434/db?target_session_attrs=read-write")
    assert (env["POSTGRES_HOST"], env["POSTGRES_PORT"], env["POSTGRES_USER"]) == ("h1", "5433", "u")
    assert (
        '"host": "h1,h2"' in env["CTXSTORE_LIBPQ"]
        and '"port": "5433,5434"' in env["CTXSTORE_LIBPQ"]
    )
    assert '"port": "5432,5432"' in library_env("postgresql://u@h1,h2/db")["CTXSTORE_LIBPQ"]
    assert library_env("postgresql://u@[::1]:5440/db")["POSTGRES_PORT"] == "5440"
    assert library_env("postgresql:///db")["POSTGRES_HOST"] == "localhost"
    for bad in ("postgresql://u@h1:x,h2/db", "postgresql://u@h1:99999/db"):
        with pytest.raises(StoreURLError, match="is not a port"):
            library_env(bad)


def _unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.postgres
def test_a_store_opens_through_the_host_that_answers(
    request: pytest.FixtureRequest, tmp_path: Path
):
    url = make_url("postgres", tmp_path, request)
    parts = urlsplit(url)
    auth = parts.netloc.rpartition("@")[0]
    hosts = f"127.0.0.1:{_unused_port()},{parts.hostname}:{parts.port or 5432}"
    query = f"{parts.query}&target_session_attrs=read-write&connect_timeout=2"
    listed = urlunsplit(parts._replace(netloc=f"{auth}@{hosts}" if auth else hosts, query=query))
    with ContextStore.from_url(listed) as store:  # the first host refuses: libpq goes on
        cid = store.create(name="over two hosts")
        store.insert(cid, {"role": "user", "content": "hello"})
        assert [m.content for m in store.visible(cid).messages] == ["hello"]
    with ContextStore.from_url(url) as store:
        assert store.visible(cid).version == 2
