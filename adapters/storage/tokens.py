"""Bearer tokens kept in the store's database, hashed (`ctxstore token create|revoke|list`).

A token is `ctxs_<id>_<secret>`: the id names it in lists and revocations, the secret is
never stored — only a SHA-256 of the whole token, looked up by that hash (a token of 256
random bits needs no slow hash: nothing can be guessed from the digest). The service asks
the table on a cache miss; an answer is trusted for `CACHE_SECONDS`, so a revocation reaches
every instance within that.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict

from ctxstore.domain.errors import InvalidOperationError

TABLE = "ctxstore_tokens"
PREFIX = "ctxs_"
CACHE_SECONDS = 5.0
DDL = (
    "CREATE TABLE IF NOT EXISTS {t} (id TEXT PRIMARY KEY, digest TEXT NOT NULL UNIQUE, "
    "tenant TEXT NOT NULL, scopes TEXT NOT NULL, name TEXT, created DOUBLE PRECISION NOT NULL, "
    "revoked DOUBLE PRECISION)"
)


class StoredToken(BaseModel):
    """A token as listed: never its secret."""

    model_config = ConfigDict(frozen=True)

    id: str
    tenant: str
    scopes: list[str]
    name: str | None
    created: float
    revoked: float | None


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class StoredTokens:
    """The tokens table of one store, in the backend's placeholder style."""

    def __init__(
        self, run: Callable[[str, tuple[Any, ...]], list[tuple[Any, ...]]], table: str, mark: str
    ) -> None:
        self._run = run  # one statement in a transaction of its own; the rows it returns
        self.table = table
        self.mark = mark
        self._cache: dict[str, tuple[float, tuple[str, frozenset[str]] | None]] = {}
        self._any: tuple[float, bool] | None = None
        self._lock = threading.Lock()

    def _sql(self, text: str) -> str:
        return text.format(t=self.table, m=self.mark)

    def _rows(self, text: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return self._run(self._sql(text), params)

    def create(
        self, tenant: str, scopes: frozenset[str], name: str | None = None
    ) -> tuple[str, StoredToken]:
        """A new token (its whole text, shown once) and its listing."""
        if not tenant.strip():
            raise InvalidOperationError("a token needs a tenant")
        token_id = secrets.token_hex(6)
        token = f"{PREFIX}{token_id}_{secrets.token_urlsafe(32)}"
        found = StoredToken(
            id=token_id, tenant=tenant.strip(), scopes=sorted(scopes), name=name,
            created=time.time(), revoked=None,
        )  # fmt: skip
        self._rows(
            "INSERT INTO {t} (id, digest, tenant, scopes, name, created) "
            "VALUES ({m}, {m}, {m}, {m}, {m}, {m})",
            (token_id, digest(token), found.tenant, ",".join(found.scopes), name, found.created),
        )
        with self._lock:
            self._any = None
        return token, found

    def revoke(self, token_id: str) -> StoredToken:
        """Revoke a token by its id; raises InvalidOperationError for an unknown id."""
        self._rows(
            "UPDATE {t} SET revoked = {m} WHERE id = {m} AND revoked IS NULL",
            (time.time(), token_id),
        )
        with self._lock:
            self._cache.clear()
        for t in self.list(token_id):
            return t
        raise InvalidOperationError(f"no token with id {token_id!r}")

    def list(self, token_id: str | None = None) -> list[StoredToken]:
        """Every token (or the one with `token_id`), oldest first."""
        where, params = ("WHERE id = {m} ", (token_id,)) if token_id is not None else ("", ())
        rows = self._rows(
            "SELECT id, tenant, scopes, name, created, revoked FROM {t} "
            + where
            + "ORDER BY created",
            params,
        )
        return [
            StoredToken(
                id=r[0], tenant=r[1], scopes=r[2].split(","), name=r[3], created=r[4], revoked=r[5]
            )
            for r in rows
        ]

    def any(self) -> bool:
        """Whether any token was ever made here (then every request must bring a valid one:
        revoking the last token must not open the service)."""
        now = time.monotonic()
        with self._lock:
            if self._any is not None and now - self._any[0] < CACHE_SECONDS:
                return self._any[1]
        found = bool(self._rows("SELECT 1 FROM {t} LIMIT 1"))
        with self._lock:
            self._any = (now, found)
        return found

    def lookup(self, token: str) -> tuple[str, frozenset[str]] | None:
        """The tenant and scopes of a token that is not revoked; None for any other."""
        if not token.startswith(PREFIX):
            return None
        key = digest(token)
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None and now - hit[0] < CACHE_SECONDS:
                return hit[1]
        rows = self._rows(
            "SELECT tenant, scopes FROM {t} WHERE digest = {m} AND revoked IS NULL", (key,)
        )
        found = (rows[0][0], frozenset(rows[0][1].split(","))) if rows else None
        with self._lock:
            if len(self._cache) > 10_000:
                self._cache.clear()
            self._cache[key] = (now, found)
        return found
