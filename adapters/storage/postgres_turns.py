"""PostgreSQL's turns: a session advisory lock on a context's key (adapters/storage/turns.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any
from uuid import UUID

import psycopg
from eventsourcing.postgres import PostgresDatastore

from ctxstore.adapters.storage.turns import TURN_SETTING, WAIT, Turn, Turns, context_lock_key


class PostgresTurns(Turns):
    """Turns as session advisory locks keyed by the context id; every insert tries the same
    key shared inside the insert function and is refused while a holder has it."""

    def __init__(self, datastore: PostgresDatastore) -> None:
        super().__init__()
        self._datastore = datastore

    @contextmanager
    def _turn(self, cid: UUID) -> Iterator[Turn | None]:
        key = context_lock_key(cid)
        with self._datastore.get_connection() as conn:
            # One round trip each way: the wait is bounded, and the connection goes back to
            # the pool as it came (its own lock timeout restored, the lock released).
            try:
                row = conn.execute(
                    "SELECT current_setting('lock_timeout') AS was, "
                    "set_config('lock_timeout', %s, false), pg_advisory_lock(%s), "
                    "set_config(%s, %s, false)",
                    (WAIT, key, TURN_SETTING, str(key)),
                ).fetchone()
            except psycopg.errors.LockNotAvailable:
                # The failed statement's set_config is undone with it.
                yield None  # queued too long (a stuck holder?): race once more
                return
            was = row["was"] if row else "0"
            try:
                yield Turn(conn)
            except BaseException:
                # What the write under the turn met stands (its settled outcome: a stored
                # write whose reply was lost, OutcomeUnknownError, a refusal): a release
                # failing on the same dead connection must not take its place.
                with suppress(psycopg.Error):
                    _release(conn, key, was)
                raise
            _release(conn, key, was)


def _release(conn: psycopg.Connection[Any], key: int, was: str) -> None:
    """Release a turn and restore its connection's lock timeout."""
    try:
        conn.execute(
            "SELECT pg_advisory_unlock(%s), set_config('lock_timeout', %s, false), "
            "set_config(%s, '', false)",
            (key, was, TURN_SETTING),
        )
    except psycopg.Error:
        # Never hand the pool a session that may still hold the lock: closed, the session
        # (and its lock) ends; the pool drops a closed connection.
        conn.close()
        raise
