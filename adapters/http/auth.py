"""Bearer tokens mapped to tenants; each tenant sees only its own contexts.

With no tokens configured the service is one shared space with no authentication (for a
single user on loopback; `ctxstore serve` refuses other addresses then).
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass, replace
from typing import Any

from ctxstore.domain.errors import CtxStoreError, InvalidOperationError
from ctxstore.domain.limits import MAX_ACTOR
from ctxstore.domain.scopes import ALL, SCOPES, parse_scopes

ACTOR_HEADER = "x-ctxstore-actor"


class NotAuthenticatedError(CtxStoreError):
    """The request carries no valid bearer token."""


@dataclass(frozen=True)
class Caller:
    """Who is calling: a tenant (None when the service has no tokens) and the actor to record."""

    tenant: str | None
    claimed_actor: str | None
    if_match: str | None = None  # the request's precondition, for the write it asks for
    scopes: frozenset[str] = ALL  # what the token may do (adapters/http/scopes.py)

    def with_if_match(self, if_match: str | None) -> Caller:
        return self if if_match is None else replace(self, if_match=if_match)

    @property
    def actor(self) -> str | None:
        """The actor written into events: the tenant, and the name the client gave under it."""
        if self.tenant is None:
            return self.claimed_actor
        return self.tenant if not self.claimed_actor else f"{self.tenant}:{self.claimed_actor}"

    @property
    def scope(self) -> str:
        """The tenant's namespace for idempotency keys."""
        return self.tenant or ""


class Tokens:
    """The configured tokens (token -> tenant, or -> {tenant, scopes}), compared in constant
    time; and, when given, tokens kept hashed in the store's database (`ctxstore token`)."""

    def __init__(self, tokens: dict[str, Any], stored: Any = None) -> None:
        self._pairs = [(t.encode(), *grant(g)) for t, g in tokens.items()]
        self._stored = stored  # StoredTokens, or None

    @property
    def required(self) -> bool:
        return bool(self._pairs) or (self._stored is not None and self._stored.any())

    def caller(self, authorization: str | None, actor: str | None) -> Caller:
        """The caller a request's headers name; raises NotAuthenticatedError."""
        claimed = (actor or "").strip() or None
        if claimed is not None and len(claimed) > MAX_ACTOR:
            raise InvalidOperationError(
                f"X-Ctxstore-Actor is {len(claimed)} characters; at most {MAX_ACTOR} are allowed"
            )
        if not self.required:
            return Caller(None, claimed)
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise NotAuthenticatedError("a bearer token is required (Authorization: Bearer ...)")
        given = token.strip().encode()
        found: tuple[str, frozenset[str]] | None = None
        for known, owner, scopes in self._pairs:  # all compared: no timing hint of a near match
            if hmac.compare_digest(known, given):
                found = (owner, scopes)
        if found is None and self._stored is not None:
            found = self._stored.lookup(token.strip())
        if found is None:
            raise NotAuthenticatedError("the bearer token is not valid")
        return Caller(found[0], claimed, scopes=found[1])


def grant(value: Any) -> tuple[str, frozenset[str]]:
    """A configured token's tenant and scopes: a bare tenant name has every scope."""
    if isinstance(value, str):
        return value, ALL
    if isinstance(value, dict):
        return value["tenant"], parse_scopes(value.get("scopes", SCOPES))
    return value.tenant, parse_scopes(value.scopes)
