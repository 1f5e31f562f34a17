"""Bounded waits on PostgreSQL: a command gives up within the configured time, and works
again as soon as the server is back.

- The library retries each recorder call ten times, each waiting up to a full pool timeout
  (a write against a stopped server took most of a minute). Here a call is tried once
  more only when the connection it held broke at once (a restarted server), after the pool
  has dropped its other broken connections; never after a pool timeout or a slow failure.
- psycopg_pool doubles the delay between reconnection attempts up to minutes; here
  attempts stay at most RECONNECT_EVERY seconds apart.
- psycopg_pool hands its idle connections out in turn; here the one returned last goes
  out first, so a process's statements keep to one warm server process.
- A server that stops answering (frozen: its kernel still acknowledges, so TCP never
  notices) would block a statement for as long as it stays frozen. The server cancels its
  own statements after statement_timeout; a connection checked out longer than that plus
  the connect timeout has its socket shut down, which fails the waiting call.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable
from functools import wraps
from typing import Any

from eventsourcing.persistence import InterfaceError, OperationalError
from eventsourcing.postgres import ConnectionPool
from psycopg_pool.base import AttemptWithBackoff

from ctxstore.adapters.storage.backend import never_sent, tried_again

RECONNECT_EVERY = 1.0  # seconds, at most, between attempts to reach the server again
FAST_FAILURE = 1.0  # seconds: a call that failed slower than this is not tried again


class _PromptAttempt(AttemptWithBackoff):
    """psycopg_pool's backoff, capped at RECONNECT_EVERY."""

    def update_delay(self, now: float) -> None:
        super().update_delay(now)
        self.delay = min(self.delay, RECONNECT_EVERY)


class _Watchdog:
    """Shuts down the socket of a connection held past its deadline; one thread per pool,
    started on first use, waking a few times a second while anything is watched."""

    def __init__(self) -> None:
        self._deadlines: dict[int, tuple[float, Any]] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = False

    def watch(self, conn: Any, seconds: float) -> None:
        with self._lock:
            self._deadlines[id(conn)] = (time.monotonic() + seconds, conn)
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(
                    target=self._run, name="ctxstore-pg-watchdog", daemon=True
                )
                self._thread.start()
        # Not woken: the deadline is seconds away, and the thread looks every 0.25 s
        # (a wake on every checkout cost each append a thread switch).

    def release(self, conn: Any) -> None:
        with self._lock:
            self._deadlines.pop(id(conn), None)

    def close(self) -> None:
        self._closed = True
        self._wake.set()

    def _run(self) -> None:
        while not self._closed:
            self._wake.wait(0.25)
            self._wake.clear()
            now = time.monotonic()
            with self._lock:
                late = [c for at, c in self._deadlines.values() if at <= now]
                for conn in late:
                    self._deadlines.pop(id(conn), None)
            for conn in late:
                cut_off(conn)


def cut_off(conn: Any) -> None:
    """Shut the connection's socket down in both directions: a call waiting on it wakes
    with an error (closing the descriptor would not wake it)."""
    try:
        fd = conn.pgconn.socket
        with socket.socket(fileno=os.dup(fd)) as sock:
            sock.shutdown(socket.SHUT_RDWR)
    except (OSError, ValueError, AttributeError):  # already closed
        pass


class BoundedPool(ConnectionPool[Any]):
    """The library's pool with prompt reconnection and a watchdog on checked-out
    connections (assigned to the library's pool as its class: no state of its own beyond
    what bound() sets)."""

    _watchdog: _Watchdog
    _held_for: float

    def bound(self, held_for: float) -> None:
        self._watchdog = _Watchdog()
        self._held_for = held_for

    def _add_connection(self, attempt: AttemptWithBackoff | None, growing: bool = False) -> None:
        super()._add_connection(
            attempt or _PromptAttempt(timeout=self.reconnect_timeout), growing=growing
        )

    def _get_ready_connection(self, timeout: float | None) -> Any:
        # The connection returned last goes out first (psycopg_pool hands them out in turn):
        # its server process is the one running warm. In turn, each statement woke another
        # of the pool's processes, and an append's insert took ~400 us more (1,100 against
        # 690 us through one held connection).
        if self._pool:
            self._pool.rotate(1)
        return super()._get_ready_connection(timeout)

    def getconn(self, timeout: float | None = None) -> Any:
        conn = super().getconn(timeout)
        self._watchdog.watch(conn, self._held_for)
        return conn

    def putconn(self, conn: Any) -> None:
        self._watchdog.release(conn)
        super().putconn(conn)

    def check_connection(self, conn: Any) -> None:  # type: ignore[override]
        # Checking an idle connection against a frozen server would block too.
        self._watchdog.watch(conn, self._held_for)
        try:
            ConnectionPool.check_connection(conn)
        finally:
            self._watchdog.release(conn)

    def close(self, timeout: float = 5.0) -> None:
        if hasattr(self, "_watchdog"):
            self._watchdog.close()
        super().close(timeout)


def bound_datastore(
    datastore: Any, connect_timeout: float, statement_timeout: float, libpq: dict[str, str]
) -> None:
    """Give the library's datastore (before its pool opens) the bounded pool, its
    connections the URL's libpq parameters and a server-side statement timeout."""
    pool = datastore.pool
    assert pool.closed, "configured before the first connection"
    BoundedPool.bound(pool, statement_timeout + connect_timeout)
    pool.__class__ = BoundedPool
    kwargs = pool.kwargs
    assert isinstance(kwargs, dict)
    kwargs.update(libpq)
    timeout = f"-c statement_timeout={int(statement_timeout * 1000)}"
    kwargs["options"] = f"{libpq['options']} {timeout}" if libpq.get("options") else timeout


def bound_retries(recorder: Any) -> None:
    """Replace the library's ten-fold retries on a recorder's calls with one immediate
    retry of a call whose connection broke at once."""
    pool = recorder.datastore.pool
    for name in dir(type(recorder)):
        method = getattr(type(recorder), name, None)
        inner = getattr(method, "__wrapped__", None)
        code = getattr(method, "__code__", None)
        if inner is None or code is None or code.co_name != "retry_decorator":
            continue
        setattr(recorder, name, _once_more(inner.__get__(recorder), pool))


def _once_more(call: Callable[..., Any], pool: BoundedPool) -> Callable[..., Any]:
    @wraps(call)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        started = time.monotonic()
        try:
            return call(*args, **kwargs)
        except (InterfaceError, OperationalError) as exc:
            if never_sent(exc) or time.monotonic() - started > FAST_FAILURE:
                raise
            pool.check()  # a restarted server broke every idle connection: drop them
            try:
                return call(*args, **kwargs)
            except BaseException as again:
                # The first try may have committed (its reply lost): a writer asks for
                # its events whatever this try met (write_attempt.settle).
                tried_again(again, exc)
                raise

    return bounded
