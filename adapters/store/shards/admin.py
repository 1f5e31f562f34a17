"""ShardedAdmin: what an operator does to a sharded store, and what the HTTP service needs
of it (`ShardedStore.admin`).

What is kept once for the whole store lives on the first server, beside the placement:
bearer tokens and the service's idempotency keys. What belongs to contexts is done on every
server: retention policies for a tenant or for everything are set on each (a context's own
policy where the context is), sweeps run on each, and the audit index is kept current on
each. The audit head is a merged cursor (merged_audit.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING
from uuid import UUID

from ctxstore.adapters.storage.idempotency import IdempotencyKeys
from ctxstore.adapters.storage.tokens import StoredToken, StoredTokens
from ctxstore.adapters.store.faults import type_faults
from ctxstore.adapters.store.retention import (
    RetentionPlan,
    RetentionPolicy,
    Sweep,
)
from ctxstore.adapters.store.shards.merged_audit import format_cursor
from ctxstore.domain.errors import RetentionConfirmationError

if TYPE_CHECKING:
    from ctxstore.adapters.store.shards.store import ShardedStore


@type_faults
class ShardedAdmin:
    """Tokens and idempotency keys on the first server; retention, sweeps and the audit
    index on every server."""

    def __init__(self, sharded: ShardedStore) -> None:
        self._sharded = sharded

    def schema_version(self) -> int:
        """The lowest schema version of the servers (each is upgraded when opened)."""
        return min(s.admin.schema_version() for s in self._sharded.stores.values())

    def idempotency_keys(self, ttl_seconds: float, pending_seconds: float) -> IdempotencyKeys:
        first = self._sharded.stores[self._sharded.names[0]]
        return first.admin.idempotency_keys(ttl_seconds, pending_seconds)

    # ---- the audit index -------------------------------------------------------------------

    def audit_head(self) -> str:
        """The merged cursor of every server's newest audit position."""
        return format_cursor({n: s.admin.audit_head() for n, s in self._sharded.stores.items()})

    def refresh_audit_index(self) -> int:
        """Index every server's events; the number of servers."""
        for s in self._sharded.stores.values():
            s.admin.refresh_audit_index()
        return len(self._sharded.stores)

    def refresh_search_index(self) -> int:
        """Index every server's changed contexts; the number of servers."""
        for s in self._sharded.stores.values():
            s.admin.refresh_search_index()
        return len(self._sharded.stores)

    def reindex(self) -> tuple[int, int]:
        """Rebuild every server's audit and search indexes; (servers, search rows)."""
        rows = sum(s.admin.reindex()[1] for s in self._sharded.stores.values())
        return len(self._sharded.stores), rows

    # ---- bearer tokens -----------------------------------------------------------------------

    @property
    def stored_tokens(self) -> StoredTokens | None:
        return self._sharded.stores[self._sharded.names[0]].admin.stored_tokens

    def create_token(
        self, tenant: str, scopes: Iterable[str] | str, *, name: str | None = None
    ) -> tuple[str, StoredToken]:
        first = self._sharded.stores[self._sharded.names[0]]
        return first.admin.create_token(tenant, scopes, name=name)

    def revoke_token(self, token_id: str) -> StoredToken:
        return self._sharded.stores[self._sharded.names[0]].admin.revoke_token(token_id)

    def tokens(self) -> list[StoredToken]:
        return self._sharded.stores[self._sharded.names[0]].admin.tokens()

    # ---- retention ---------------------------------------------------------------------------

    def set_retention(
        self, expire_after: float | None, *, keep_latest: int | None = None,
        tenant: str | None = None, context_id: UUID | str | None = None,
        everything: bool = False, actor: str | None = None, force: bool = False,
        yes: bool = False,
    ) -> RetentionPolicy | None:  # fmt: skip
        """As StoreAdmin.set_retention: a context's policy where the context is, a tenant's
        or everything's on every server (a move carries a context's own policy); the
        confirmation covers every server's plan before any is set."""
        if context_id is not None:
            home = self._sharded.store_of(context_id)
            return home.admin.set_retention(
                expire_after, keep_latest=keep_latest, context_id=context_id, actor=actor,
                force=force, yes=yes,
            )  # fmt: skip
        if not yes and (expire_after is not None or keep_latest is not None):
            plan = self.retention_preview(
                expire_after, keep_latest=keep_latest, tenant=tenant, everything=everything
            )
            if not plan.empty():
                raise RetentionConfirmationError(
                    f"under this policy the next sweep would {plan.summary()} "
                    "(`ctxstore serve` sweeps every minute): pass yes=True (--yes) to set it",
                    plan,
                )
        found = None
        for s in self._sharded.stores.values():
            found = s.admin.set_retention(
                expire_after, keep_latest=keep_latest, tenant=tenant, everything=everything,
                actor=actor, force=force, yes=True,
            )  # fmt: skip
        return found

    def retention_policy(
        self, *, tenant: str | None = None, context_id: UUID | str | None = None,
        everything: bool = False,
    ) -> RetentionPolicy | None:  # fmt: skip
        """As StoreAdmin.retention_policy (a context's where it is; the others are set on
        every server alike)."""
        if context_id is not None:
            return self._sharded.store_of(context_id).admin.retention_policy(context_id=context_id)
        first = self._sharded.stores[self._sharded.names[0]]
        return first.admin.retention_policy(tenant=tenant, everything=everything)

    def retention_preview(
        self, expire_after: float | None, *, keep_latest: int | None = None,
        tenant: str | None = None, context_id: UUID | str | None = None,
        everything: bool = False,
    ) -> RetentionPlan:  # fmt: skip
        """As StoreAdmin.retention_preview, on every server (a context's where it is)."""
        if context_id is not None:
            return self._sharded.store_of(context_id).admin.retention_preview(
                expire_after, keep_latest=keep_latest, context_id=context_id
            )
        plan = RetentionPlan()
        for s in self._sharded.stores.values():
            plan = plan.merged(s.admin.retention_preview(
                expire_after, keep_latest=keep_latest, tenant=tenant, everything=everything
            ))  # fmt: skip
        return plan

    def would_expire(
        self, expire_after: float | None, *, tenant: str | None = None,
        context_id: UUID | str | None = None, everything: bool = False,
    ) -> list[UUID]:  # fmt: skip
        """As StoreAdmin.would_expire, on every server (a context's where it is)."""
        if context_id is not None:
            return self._sharded.store_of(context_id).admin.would_expire(
                expire_after, context_id=context_id
            )
        return [
            c for s in self._sharded.stores.values()
            for c in s.admin.would_expire(expire_after, tenant=tenant, everything=everything)
        ]  # fmt: skip

    def sweep_plan(self) -> RetentionPlan:
        plan = RetentionPlan()
        for s in self._sharded.stores.values():
            plan = plan.merged(s.admin.sweep_plan())
        return plan

    def retention_policies(self) -> list[RetentionPolicy]:
        """Every server's policies, one per scope (a context's where it is)."""
        by_scope: dict[str, RetentionPolicy] = {}
        for s in self._sharded.stores.values():
            for p in s.admin.retention_policies():
                by_scope.setdefault(p.scope, p)
        return sorted(by_scope.values(), key=lambda p: p.scope)

    def sweep(self, *, actor: str | None = None) -> Sweep:
        """Sweep every server (each records its own sweep); what they did together."""
        done = [s.admin.sweep(actor=actor) for s in self._sharded.stores.values()]
        return Sweep(
            id=done[0].id, started=min(d.started for d in done),
            finished=max(d.finished for d in done), actor=done[0].actor,
            expired=[c for d in done for c in d.expired],
            trimmed={k: v for d in done for k, v in d.trimmed.items()},
            failed={k: v for d in done for k, v in d.failed.items()},
        )  # fmt: skip

    def sweeps(self, *, limit: int = 100) -> list[Sweep]:
        """Every server's recorded sweeps, newest first."""
        found = [w for s in self._sharded.stores.values() for w in s.admin.sweeps(limit=limit)]
        return sorted(found, key=lambda w: w.started, reverse=True)[:limit]
