"""Wake-ups when events are stored, by this process or any other: what a live tail waits on.

A subscriber gives a callback taking the hex id of a context that has new events (or None:
any context may have). Callbacks must be quick (set a flag); what is new is read from the
store itself, so a wake-up carries no event and a missed or repeated one loses nothing.

- This process's writes wake subscribers at once (the writer publishes after each insert).
- PostgreSQL: a trigger on the events table notifies at commit (LISTEN/NOTIFY, one
  listening connection per store), so every service instance sharing the database wakes.
- SQLite: one thread per store watches the file's newest row (a read of one B-tree page,
  every `interval` seconds while anyone subscribes): other processes' writes wake it.
- memory://: one process, so this process's writes are all there are.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable
from itertools import count

log = logging.getLogger(__name__)
Wake = Callable[[str | None], None]


class Notifications:
    """Subscribers and the wake-ups they get; this process's writes only (memory://)."""

    def __init__(self) -> None:
        self._subscribers: dict[int, Wake] = {}
        self._ids = count()
        self._lock = threading.Lock()
        self._closed = threading.Event()

    def subscribe(self, wake: Wake) -> Callable[[], None]:
        """Call `wake` for every context that gets new events until the returned function
        is called."""
        with self._lock:
            key = next(self._ids)
            self._subscribers[key] = wake
            first = len(self._subscribers) == 1
        if first:
            self._watch()
        return lambda: self._unsubscribe(key)

    def _unsubscribe(self, key: int) -> None:
        with self._lock:
            self._subscribers.pop(key, None)

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
    trigger (migration 5) notifies each committed insert's contexts."""

    thread_name = "ctxstore-pg-listen"

    def __init__(self, conninfo: str, channel: str) -> None:
        super().__init__()
        self.conninfo, self.channel = conninfo, channel

    def _run(self) -> None:
        import psycopg
        from psycopg import sql

        backoff = 0.05
        while not self._closed.is_set():
            try:
                with psycopg.connect(self.conninfo, autocommit=True) as conn:
                    conn.execute(sql.SQL("LISTEN {0}").format(sql.Identifier(self.channel)))
                    backoff = 0.05
                    self.publish(None)  # anything written while not listening
                    while not self._closed.is_set():
                        for note in conn.notifies(timeout=0.5):
                            self._delivered(note.payload)
            except psycopg.Error as exc:
                if self._closed.is_set():
                    return
                log.warning("listening for new events failed (%s); reconnecting", exc)
                self._closed.wait(backoff)
                backoff = min(backoff * 2, 2.0)

    def _delivered(self, payload: str) -> None:
        if not payload or payload == "*":
            self.publish(None)
            return
        for hex_id in payload.split(","):
            self.publish(hex_id.replace("-", ""))
