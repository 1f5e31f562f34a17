"""A TCP proxy in front of PostgreSQL that loses the reply to a committed write.

Armed, it lets the next commit reach the server (the Sync after a write's Execute, or an
explicit COMMIT), waits for the server's answer (the transaction is committed) and closes
the client's connection without passing it on: the client sees its connection drop after
the commit, as after a network fault. Other connections and everything before pass through
unchanged. It refuses SSL so that it can read the protocol (the client falls back to plain
TCP on loopback). Used by tests/integration/test_lost_replies.py and bench_reliability.py.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading

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
