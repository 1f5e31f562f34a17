"""Bearer tokens mapped to tenants; each tenant sees only its own contexts.

With no tokens configured the service is one shared space with no authentication (for a
single user on loopback; `ctxstore serve` refuses other addresses then).
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass, replace

from ctxstore.domain.errors import CtxStoreError, InvalidOperationError
from ctxstore.domain.limits import MAX_ACTOR

ACTOR_HEADER = "x-ctxstore-actor"


class NotAuthenticatedError(CtxStoreError):
    """The request carries no valid bearer token."""


@dataclass(frozen=True)
class Caller:
    """Who is calling: a tenant (None when the service has no tokens) and the actor to record."""

    tenant: str | None
    claimed_actor: str | None
    if_match: str | None = None  # the request's precondition, for the write it asks for

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
    """The configured token -> tenant map, compared in constant time."""

    def __init__(self, tokens: dict[str, str]) -> None:
        self._pairs = [(t.encode(), tenant) for t, tenant in tokens.items()]

    @property
    def required(self) -> bool:
        return bool(self._pairs)

    def caller(self, authorization: str | None, actor: str | None) -> Caller:
        """The caller a request's headers name; raises NotAuthenticatedError."""
        claimed = (actor or "").strip() or None
        if claimed is not None and len(claimed) > MAX_ACTOR:
            raise InvalidOperationError(
                f"X-Ctxstore-Actor is {len(claimed)} characters; at most {MAX_ACTOR} are allowed"
            )
        if not self._pairs:
            return Caller(None, claimed)
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise NotAuthenticatedError("a bearer token is required (Authorization: Bearer ...)")
        given = token.strip().encode()
        tenant = None
        for known, owner in self._pairs:  # every pair compared: no timing hint of a near match
            if hmac.compare_digest(known, given):
                tenant = owner
        if tenant is None:
            raise NotAuthenticatedError("the bearer token is not valid")
        return Caller(tenant, claimed)
