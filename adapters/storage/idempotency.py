"""Idempotency keys: a retried POST with the same key gets the first response, not a second write.

A key is claimed before the request runs (a row with no status), and the response is stored
when it succeeds; a request that fails writes nothing, so its claim is released and a retry
runs again. Keys live in the store's own database, so every service instance sharing it
honours them, and they survive a restart. Each step is one statement. A claim whose request never finished (the process
died) is taken as lost after `pending_seconds`: the retry then runs again, which is the one
case where a write could repeat — ctxstore cannot tell whether the lost request committed.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from ctxstore.adapters.keys.cipher import STORE_KEY


@dataclass(frozen=True)
class Claimed:
    """What an earlier request under the same key left: its fingerprint and, once done,
    its response (status None: still running)."""

    fingerprint: str
    status: int | None
    body: bytes | None


class IdempotencyKeys(ABC):
    """The keys of one store, per tenant."""

    def __init__(self, ttl_seconds: float, pending_seconds: float) -> None:
        self.ttl = ttl_seconds
        self.pending = pending_seconds

    @abstractmethod
    def claim(
        self, tenant: str, key: str, fingerprint: str, context: str | None = None
    ) -> Claimed | None:
        """Claim a key for a request (about `context`, if its path names one); None when
        claimed now, else what holds it. Erasing the context deletes its stored responses."""

    @abstractmethod
    def complete(self, tenant: str, key: str, status: int, body: bytes) -> None:
        """Store the response of the request that claimed the key."""

    @abstractmethod
    def release(self, tenant: str, key: str) -> None:
        """Forget a claim whose request wrote nothing."""

    def _expired_before(self) -> tuple[float, float]:
        now = time.time()
        return now - self.ttl, now - self.pending


# One statement claims a key: a new row, or an expired one taken over; nothing returned
# means a live request holds it (then, rarely, a second statement reads what it left).
CLAIM = (
    "INSERT INTO {table} (tenant, key, fingerprint, created, context) "
    "VALUES ({m}, {m}, {m}, {m}, {m}) "
    "ON CONFLICT (tenant, key) DO UPDATE SET fingerprint = excluded.fingerprint, "
    "status = NULL, body = NULL, created = excluded.created, context = excluded.context "
    "WHERE ({table}.status IS NOT NULL AND {table}.created < {m}) "
    "OR ({table}.status IS NULL AND {table}.created < {m}) RETURNING 1"
)
HELD = "SELECT fingerprint, status, body, context FROM {table} WHERE tenant = {m} AND key = {m}"
COMPLETE = (
    "UPDATE {table} SET status = {m}, body = {m}, created = {m} WHERE tenant = {m} AND key = {m}"
)
RELEASE = "DELETE FROM {table} WHERE tenant = {m} AND key = {m} AND status IS NULL"


class SQLIdempotencyKeys(IdempotencyKeys, ABC):
    """Keys in a table: each step is one statement, in the backend's placeholder style.

    Stored responses are sealed with their context's data key when the store encrypts (the
    store's own key for a request about no one context): a replayed prompt holds message
    contents, which must not sit in the database in plain text, nor outlive an erasure.
    """

    cipher: Any = None  # ContextCipher (adapters/keys/cipher.py)

    def _owner(self, context: str | None) -> UUID | str:
        if context:
            try:
                return UUID(context)
            except ValueError:
                pass
        return STORE_KEY

    def __init__(self, table: str, mark: str, ttl: float, pending: float) -> None:
        super().__init__(ttl, pending)
        self._claimed: dict[tuple[str, str], str | None] = {}  # whose key seals the response
        self.sql = {
            name: text.format(table=table, m=mark)
            for name, text in (
                ("claim", CLAIM), ("held", HELD), ("complete", COMPLETE), ("release", RELEASE)
            )
        }  # fmt: skip

    @abstractmethod
    def _one(self, statement: str, params: tuple[Any, ...]) -> Any:
        """Run one named statement on its own; the row it returns, if any, as a tuple."""

    def claim(
        self, tenant: str, key: str, fingerprint: str, context: str | None = None
    ) -> Claimed | None:
        done_before, pending_before = self._expired_before()
        params = (tenant, key, fingerprint, time.time(), context, done_before, pending_before)
        if self._one("claim", params) is not None:
            self._claimed[(tenant, key)] = context
            return None
        row = self._one("held", (tenant, key))
        if row is None:  # released in between: try again
            return self.claim(tenant, key, fingerprint, context)
        body = None if row[2] is None else bytes(row[2])
        if body is not None and self.cipher is not None:
            body = self.cipher.decrypt(self._owner(row[3]), body)
        return Claimed(row[0], row[1], body)

    def complete(self, tenant: str, key: str, status: int, body: bytes) -> None:
        context = self._claimed.pop((tenant, key), None)
        if self.cipher is not None:
            body = self.cipher.encrypt(self._owner(context), body)
        self._one("complete", (status, body, time.time(), tenant, key))

    def release(self, tenant: str, key: str) -> None:
        self._claimed.pop((tenant, key), None)
        self._one("release", (tenant, key))
