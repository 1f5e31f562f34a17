"""A real service on a loopback port (uvicorn in a thread) over SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from ctxstore.adapters.http.client import CtxStoreClient
from ctxstore.adapters.http.tail import TailHub
from ctxstore.adapters.settings import ServiceConfig
from ctxstore.adapters.store.facade import ContextStore

from ..conftest import TENANT_TOKENS, served

TOKENS = TENANT_TOKENS


@dataclass
class Service:
    url: str
    store: ContextStore  # the service's own store, for checks behind its back

    def client(self, token: str | None = "token-acme", **kw) -> CtxStoreClient:
        return CtxStoreClient(self.url, token=token, **kw)


def serve(store: ContextStore, config: ServiceConfig, tail: TailHub | None = None) -> Iterator[str]:
    with served(store, config, tail) as url:
        yield url


@pytest.fixture
def service(durable_url: str) -> Iterator[Service]:
    config = ServiceConfig(tokens=TOKENS, max_body_bytes=64 * 1024, audit_refresh_seconds=0.2)
    with ContextStore.from_url(durable_url) as store:
        for url in serve(store, config):
            yield Service(url, store)


@pytest.fixture
def sqlite_service(tmp_path) -> Iterator[Service]:
    """A service on a fresh SQLite file with the README's token."""
    config = ServiceConfig(tokens={"tok-acme": "acme"}, audit_refresh_seconds=0.2)
    with ContextStore.from_url(f"sqlite:///{tmp_path / 'readme.db'}") as store:
        for url in serve(store, config):
            yield Service(url, store)
