"""Wake-ups when events are stored, by this process or any other: what a live tail waits on.

A subscriber gives a callback taking the hex id of a context that has new events (or None:
any context may have). Callbacks must be quick (set a flag); what is new is read from the
store itself, so a wake-up carries no event and a missed or repeated one loses nothing.

- This process's writes wake subscribers at once (the writer publishes after each insert).
- PostgreSQL: a trigger on the events table notifies at commit (LISTEN/NOTIFY, one
  listening connection per store), so every service instance sharing the database wakes;
  but only for contexts someone follows. A NOTIFY takes a database-wide lock while its
  transaction commits, which would make every writer's commit wait for every other's, so
  a store registers the contexts its subscribers follow (`ctxstore_listeners`, renewed
  every few seconds while they do) and the trigger notifies only when one of the contexts
  written, or any context ('*'), is followed.
- SQLite: one thread per store watches the file's newest row (a read of one B-tree page,
  every `interval` seconds while anyone subscribes): other processes' writes wake it.
- memory://: one process, so this process's writes are all there are.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable
from itertools import count
from typing import Any

from ctxstore.domain.errors import first_line

log = logging.getLogger(__name__)
Wake = Callable[[str | None], None]
RENEW = 5.0  # seconds between renewals of the contexts a PostgreSQL store follows
FORGOTTEN = 30  # seconds after its last renewal a listener's row stops counting


class Notifications:
    """Subscribers and the wake-ups they get; this process's writes only (memory://)."""

    def __init__(self) -> None:
        self._subscribers: dict[int, Wake] = {}
        self._follows: dict[int, str] = {}  # subscriber -> the context it follows, or "*"
        self._ids = count()
        self._lock = threading.Lock()
        self._closed = threading.Event()

    def subscribe(self, wake: Wake, context: str | None = None) -> Callable[[], None]:
        """Call `wake` for every context that gets new events until the returned function
        is called. `context` (a hex id) says the subscriber follows only that one: other
        processes' writes to other contexts need not wake this store."""
        with self._lock:
            key = next(self._ids)
            self._subscribers[key] = wake
            self._follows[key] = context or "*"
            first = len(self._subscribers) == 1
        self._follow(self.followed())
        if first:
            self._watch()
        return lambda: self._unsubscribe(key)

    def _unsubscribe(self, key: int) -> None:
        with self._lock:
            self._subscribers.pop(key, None)
            self._follows.pop(key, None)

    def followed(self) -> set[str]:
        """The contexts the subscribers follow ("*": any)."""
        with self._lock:
            return set(self._follows.values())

    def _follow(self, contexts: set[str]) -> None:
        """Make other processes' writes to these contexts wake this store (a backend's own),
        before the subscriber reads what is stored."""

    @property
    def watched(self) -> bool:
        return bool(self._subscribers)

    def publish(self, context_hex: str | None) -> None:
        """Wake the subscribers: `context_hex` has new events (None: any may have)."""
        for wake in list(self._subscribers.values()):
            try:
                wake(context_hex)
            except Exception:  # one subscriber's failure is its own
                log.exception("a live tail's wake-up failed")

    def _watch(self) -> None:
        """Start watching other processes' writes (a backend's own), if not yet."""

    def close(self) -> None:
        self._closed.set()


class WatchingNotifications(Notifications):
    """Notifications that watch other processes' writes from a thread of their own, started
    with the first subscriber (`_run` until closed)."""

    thread_name = "ctxstore-watch"

    def __init__(self) -> None:
        super().__init__()
        self._thread: threading.Thread | None = None
        self._start = threading.Lock()

    def _watch(self) -> None:
        with self._start:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name=self.thread_name, daemon=True
                )
                self._thread.start()

    def _run(self) -> None:
        raise NotImplementedError


class PollingNotifications(WatchingNotifications):
    """SQLite: a thread reads the events table's newest rowid every `interval` seconds
    while there are subscribers, and wakes them for each context written since."""

    thread_name = "ctxstore-sqlite-watch"

    def __init__(self, path: str, table: str, interval: float = 0.01) -> None:
        super().__init__()
        self.path, self.table, self.interval = path, table, interval

    def _run(self) -> None:
        conn: sqlite3.Connection | None = None
        seen: int | None = None
        while not self._closed.wait(self.interval):
            if not self.watched:
                seen = None  # nobody listens: stop reading until someone does
                continue
            try:
                if conn is None:
                    conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
                newest = conn.execute(f"SELECT max(rowid) FROM {self.table}").fetchone()[0] or 0
                if seen is not None and newest > seen:
                    rows = conn.execute(
                        f"SELECT DISTINCT originator_id FROM {self.table} WHERE rowid > ?",
                        (seen,),
                    ).fetchall()
                    for (hex_id,) in rows:
                        self.publish(str(hex_id).replace("-", ""))
                elif seen is not None and newest < seen:
                    self.publish(None)  # rows went (an erasure): let everyone look
                seen = newest
            except sqlite3.Error:
                log.warning("watching %s for new events failed; retrying", self.path)
                if conn is not None:
                    conn.close()
                conn, seen = None, None
                self.publish(None)
        if conn is not None:
            conn.close()


class PostgresNotifications(WatchingNotifications):
    """PostgreSQL: one connection LISTENs on the schema's channel; the events table's
    trigger (migrations 5 and 9) notifies each committed insert's contexts, when they are
    followed: this store registers what its subscribers follow in the listeners table."""

    thread_name = "ctxstore-pg-listen"

    def __init__(self, conninfo: str, channel: str, listeners: str) -> None:
        super().__init__()
        self.conninfo, self.channel, self.listeners = conninfo, channel, listeners
        self.listener = uuid.uuid4().hex  # this store's name in the listeners table
        self._registered: set[str] = set()
        self._renewed = 0.0
        self._register_lock = threading.Lock()
        self._conn: Any = None

    def _follow(self, contexts: set[str]) -> None:
        if contexts - self._registered:
            self._register(contexts, renew=False)

    def _register(self, contexts: set[str], *, renew: bool) -> None:
        """Record the contexts followed (renewing them all when `renew`), forget those no
        longer followed, and listeners that stopped renewing a minute ago."""
        import psycopg

        with self._register_lock:
            try:
                if self._conn is None or self._conn.closed:
                    self._conn = psycopg.connect(self.conninfo, autocommit=True)
                new = contexts if renew else contexts - self._registered
                with self._conn.transaction():
                    if new:
                        self._conn.cursor().executemany(
                            f"INSERT INTO {self.listeners} (listener, context, seen) "
                            "VALUES (%s, %s, now()) ON CONFLICT (context, listener) "
                            "DO UPDATE SET seen = now()",
                            [(self.listener, c) for c in sorted(new)],
                        )
                    gone = self._registered - contexts
                    if gone:
                        self._conn.execute(
                            f"DELETE FROM {self.listeners} WHERE listener = %s "
                            "AND context = ANY(%s)",
                            (self.listener, sorted(gone)),
                        )
                    if renew:
                        self._conn.execute(
                            f"DELETE FROM {self.listeners} WHERE seen < now() - %s::interval",
                            (f"{FORGOTTEN} seconds",),
                        )
                self._registered = set(contexts)
                self._renewed = time.monotonic()
            except psycopg.Error as exc:
                # Not registered: other processes' writes reach this store's followers by
                # their periodic look (tail.py), later, not never.
                log.warning("registering the contexts followed failed (%s)", exc)
                if self._conn is not None:
                    self._conn.close()
                self._conn = None

    def close(self) -> None:
        super().close()
        with self._register_lock:
            if self._conn is not None and not self._conn.closed:
                with contextlib.suppress(Exception):
                    self._conn.execute(
                        f"DELETE FROM {self.listeners} WHERE listener = %s", (self.listener,)
                    )
                self._conn.close()
            self._conn = None

    def _run(self) -> None:
        import psycopg
        from psycopg import sql

        backoff = 0.05
        down = False  # an outage is said once, in one line, and its end once
        while not self._closed.is_set():
            try:
                with psycopg.connect(self.conninfo, autocommit=True) as conn:
                    conn.execute(sql.SQL("LISTEN {0}").format(sql.Identifier(self.channel)))
                    backoff = 0.05
                    if down:
                        log.warning("listening for new events again")
                        down = False
                    self.publish(None)  # anything written while not listening
                    while not self._closed.is_set():
                        for note in conn.notifies(timeout=0.5):
                            self._delivered(note.payload)
                        if time.monotonic() - self._renewed > RENEW or (
                            self._registered != self.followed()
                        ):
                            self._register(self.followed(), renew=True)
            except psycopg.Error as exc:
                if self._closed.is_set():
                    return
                if not down:  # libpq's message runs over several lines: its first says it
                    said = first_line(exc) or type(exc).__name__
                    log.warning("listening for new events failed (%s); reconnecting", said)
                    down = True
                self._closed.wait(backoff)
                backoff = min(backoff * 2, 2.0)

    def _delivered(self, payload: str) -> None:
        if not payload or payload == "*":
            self.publish(None)
            return
        for hex_id in payload.split(","):
            self.publish(hex_id.replace("-", ""))
