"""Fixtures of the integration tests: a PostgreSQL store behind a proxy that loses the
reply to a committed write.

The proxy lets the next COMMIT reach the server once armed, waits for the server's answer
(the transaction is committed) and closes the client's connection without passing it on:
the client sees its connection drop after the commit, as after a network fault. Other
connections and everything before pass through unchanged. It refuses SSL so that it can read
the protocol (the client falls back to plain TCP on loopback).
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import uuid
from collections.abc import Iterator

import psycopg
import pytest

from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore

SSL_REQUEST = 80877103
GSS_REQUEST = 80877104


def _exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


class LosingProxy:
    def __init__(self, host: str = "127.0.0.1", port: int = 5432) -> None:
        self.target = (host, port)
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.armed = threading.Event()
        self.lost = 0  # replies lost so far
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def arm(self) -> None:
        """Lose the reply to the next COMMIT any connection sends."""
        self.armed.set()

    def close(self) -> None:
        self._closed = True
        self.listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        server = socket.create_connection(self.target)
        try:
            while True:  # the startup: SSL and GSS requests refused, then the real one
                length, code = struct.unpack("!ii", _exact(client, 8))
                if code in (SSL_REQUEST, GSS_REQUEST):
                    client.sendall(b"N")
                    continue
                server.sendall(struct.pack("!ii", length, code) + _exact(client, length - 8))
                break
            cutting, replied = threading.Event(), threading.Event()
            threading.Thread(
                target=self._back, args=(server, client, cutting, replied), daemon=True
            ).start()
            prepared: dict[bytes, bool] = {}  # statement name -> inserts events
            writing = False  # the statement bound last inserts events
            while True:
                kind = _exact(client, 1)
                (length,) = struct.unpack("!i", _exact(client, 4))
                body = _exact(client, length - 4)
                message = kind + struct.pack("!i", length) + body
                if kind == b"P":  # Parse: name, query
                    name, _, rest = body.partition(b"\0")
                    prepared[name] = b"insert_events" in rest.split(b"\0", 1)[0]
                elif kind == b"B":  # Bind: portal, statement
                    writing = prepared.get(body.split(b"\0")[1], False)
                # The write commits with the Sync after its Execute (autocommit), or with
                # an explicit COMMIT: let it through, then lose the server's answer.
                commits = (kind == b"S" and writing) or (
                    kind == b"Q" and body.upper().startswith(b"COMMIT")
                )
                if commits and self.armed.is_set():
                    self.armed.clear()
                    cutting.set()
                    server.sendall(message)
                    replied.wait(10)  # the server has committed and answered
                    self.lost += 1
                    return
                if kind == b"S":
                    writing = False
                server.sendall(message)
        except (ConnectionError, OSError):
            return
        finally:
            for s in (client, server):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()

    @staticmethod
    def _back(
        server: socket.socket, client: socket.socket, cutting: threading.Event,
        replied: threading.Event,
    ) -> None:  # fmt: skip
        try:
            while True:
                data = server.recv(65536)
                if not data:
                    return
                if cutting.is_set():
                    replied.set()  # the answer to the COMMIT: never passed on
                    return
                client.sendall(data)
        except OSError:
            return


@pytest.fixture
def losing_proxy() -> Iterator[LosingProxy]:
    proxy = LosingProxy()
    yield proxy
    proxy.close()


@pytest.fixture
def proxied_store(
    pg_url: str, pg_admin_dsn: str, losing_proxy: LosingProxy
) -> Iterator[ContextStore]:
    """A store on a fresh schema of the test database, every connection through the proxy."""
    schema = f"t_{uuid.uuid4().hex[:10]}"
    info = psycopg.conninfo.conninfo_to_dict(pg_admin_dsn)
    info["dbname"] = pg_url.rsplit("/", 1)[1]
    with psycopg.connect(psycopg.conninfo.make_conninfo("", **info), autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    host_port = pg_url.split("@", 1)[1].split("/", 1)[0]
    url = pg_url.replace(host_port, f"127.0.0.1:{losing_proxy.port}") + f"?schema={schema}"
    with ContextStore.from_url(url, Settings(actor="t", snapshot_interval=1000)) as store:
        yield store
