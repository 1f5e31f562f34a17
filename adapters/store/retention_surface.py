"""What ContextStore offers over retention (adapters/store/retention.py)."""

from __future__ import annotations

from uuid import UUID

from ctxstore.adapters.store import sweeping
from ctxstore.adapters.store.core import StoreCore
from ctxstore.adapters.store.retention import ACTOR, RetentionPolicy, Sweep, scope_of


class RetentionSurface:
    _core: StoreCore

    def set_retention(
        self, expire_after: float | None, *, keep_latest: int | None = None,
        tenant: str | None = None, context_id: UUID | str | None = None,
        everything: bool = False, actor: str | None = None,
    ) -> RetentionPolicy | None:  # fmt: skip
        """Expire contexts after `expire_after` seconds without a write, and/or keep only
        the latest `keep_latest` events of each (both None removes the policy): for one
        context, a tenant's contexts, or every context (`everything`); the most specific
        policy applies. Raises InvalidOperationError, ContextNotFoundError."""
        cid = None
        if context_id is not None:
            cid = self._core.id(context_id)
            self._core.tenant_of(cid)  # raises ContextNotFoundError
        scope = scope_of(tenant=tenant, context_id=cid, everything=everything)
        retention = self._core.retention
        retention.set(scope, expire_after, keep_latest, self._core.actor(actor))
        return retention.policies().get(scope)

    def retention_policies(self) -> list[RetentionPolicy]:
        """Every retention policy, by scope."""
        return list(self._core.retention.policies(fresh=True).values())

    def sweep(self, *, actor: str | None = None) -> Sweep:
        """Erase every context its policy has expired (each leaves its erasure record, by
        `ctxstore:retention` unless `actor`); the sweep is recorded."""
        return sweeping.sweep(self._core, actor or ACTOR)

    def sweeps(self, *, limit: int = 100) -> list[Sweep]:
        """The recorded sweeps, newest first."""
        return self._core.retention.sweeps(limit)
