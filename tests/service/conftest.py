"""A real service on a loopback port (uvicorn in a thread) over SQLite and PostgreSQL."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import uvicorn

from ctxstore.adapters.http import create_app
from ctxstore.adapters.http.client import CtxStoreClient
from ctxstore.adapters.http.tail import TailHub
from ctxstore.adapters.settings import ServiceConfig
from ctxstore.adapters.store.facade import ContextStore

TOKENS = {"token-acme": "acme", "token-globex": "globex"}


@dataclass
class Service:
    url: str
    store: ContextStore  # the service's own store, for checks behind its back

    def client(self, token: str | None = "token-acme", **kw) -> CtxStoreClient:
        return CtxStoreClient(self.url, token=token, **kw)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(store: ContextStore, config: ServiceConfig, tail: TailHub | None = None) -> Iterator[str]:
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(store, config, tail=tail),
            host="127.0.0.1",
            port=port,
            log_level="warning",
            timeout_graceful_shutdown=1,
        )
    )
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
