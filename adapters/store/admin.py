"""StoreAdmin: what an operator does to a store, beside what callers do to contexts.

`store.admin` holds it: bearer tokens kept in the database, encryption keys (encrypt in
place, rekey, rotate the KEK), retention policies and sweeps, the audit index's upkeep,
the HTTP service's idempotency keys and the schema version. The command line and the
HTTP service's admin routes use it; the contract (what SDKs and integrations call) does
not, so the store's own face stays the contract's operations and its reads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from uuid import UUID

from pydantic import BaseModel, ConfigDict

from ctxstore.adapters.keys.cipher import ContextCipher, DataKeys
from ctxstore.adapters.keys.reseal import BATCH as RESEAL_BATCH
from ctxstore.adapters.keys.reseal import Resealing, rekey, reseal
from ctxstore.adapters.keys.rotation import BATCH, KekRotation, rotate_kek
from ctxstore.adapters.storage.events import EventStorage
from ctxstore.adapters.storage.idempotency import IdempotencyKeys
from ctxstore.adapters.storage.tokens import StoredToken, StoredTokens
from ctxstore.adapters.store import audit, search, sweeping
from ctxstore.adapters.store.core import StoreCore
from ctxstore.adapters.store.faults import type_faults
from ctxstore.adapters.store.retention import (
    ACTOR,
    RetentionPlan,
    RetentionPolicy,
    Sweep,
    scope_of,
)
from ctxstore.domain.durations import check_expiry
from ctxstore.domain.errors import InvalidOperationError, RetentionConfirmationError
from ctxstore.domain.scopes import parse_scopes


class KeyStatus(BaseModel):
    """The store's keys: the KEK new wraps use, where data keys live, how many each KEK wraps."""

    model_config = ConfigDict(frozen=True)

    kek: str
    vault: str
    apart: bool  # the vault is outside the events database (its WAL and backups)
    by_kek: dict[str, int]


@type_faults
class StoreAdmin:
    """Tokens, keys, retention, the audit index and the schema of one store."""

    def __init__(self, core: StoreCore, storage: EventStorage) -> None:
        self._core = core
        self._storage = storage

    # ---- schema and the service's keys ---------------------------------------------------

    def schema_version(self) -> int:
        """The schema version this store is at (this release's, once opened)."""
        return self._storage.schema_version

    def idempotency_keys(self, ttl_seconds: float, pending_seconds: float) -> IdempotencyKeys:
        """The HTTP service's idempotency keys, kept in this store's database."""
        return self._storage.idempotency_keys(ttl_seconds, pending_seconds)

    # ---- the audit index -------------------------------------------------------------------

    def audit_head(self) -> int:
        """The newest audit position (where a tenant's live tail starts by default)."""
        return audit.catch_up(self._core)

    def refresh_audit_index(self) -> int:
        """Index every event stored so far (queries do it first anyway); the position reached."""
        return audit.catch_up(self._core)

    def refresh_search_index(self) -> int:
        """Index every context changed so far (searches do it first anyway); the audit
        position the index reached (0 when search is turned off)."""
        if self._core.storage.search_index is None:
            return 0
        return search.catch_up(self._core)

    def reindex(self) -> tuple[int, int]:
        """Rebuild the audit index and the search index from the events; the position the
        audit index reached and the rows the search index holds (0: search turned off)."""
        position = self.rebuild_audit_index()
        rows = 0 if self._core.storage.search_index is None else search.reindex(self._core)
        return position, rows

    def rebuild_audit_index(self) -> int:
        """Rebuild the audit index from the events (after it was damaged); returns the
        position it reached."""
        self._core.storage.audit_index.reset()
        if self._core.storage.search_index is not None:  # it follows the audit's positions
            self._core.storage.search_index.rewind()
        return audit.catch_up(self._core)

    # ---- bearer tokens -----------------------------------------------------------------------

    @property
    def stored_tokens(self) -> StoredTokens | None:
        """The tokens table (None on memory://), for the HTTP service."""
        return self._core.storage.tokens

    def _tokens(self) -> StoredTokens:
        found = self._core.storage.tokens
        if found is None:
            raise InvalidOperationError("tokens are kept in a SQLite or PostgreSQL store")
        return found

    def create_token(
        self, tenant: str, scopes: Iterable[str] | str, *, name: str | None = None
    ) -> tuple[str, StoredToken]:
        """A new bearer token for `tenant` with `scopes` (read, write, audit, admin): its
        text (shown once; only a hash is kept) and its listing."""
        try:
            granted = parse_scopes(scopes)
        except ValueError as exc:
            raise InvalidOperationError(str(exc)) from None
        return self._tokens().create(tenant, granted, name)

    def revoke_token(self, token_id: str) -> StoredToken:
        """Revoke a token by its id (every service instance refuses it within 5 s)."""
        return self._tokens().revoke(token_id)

    def tokens(self) -> list[StoredToken]:
        """The tokens kept in the database, revoked ones too; never their secrets."""
        return self._tokens().list()

    # ---- retention ---------------------------------------------------------------------------

    def set_retention(
        self, expire_after: float | None, *, keep_latest: int | None = None,
        tenant: str | None = None, context_id: UUID | str | None = None,
        everything: bool = False, actor: str | None = None, force: bool = False,
        yes: bool = False,
    ) -> RetentionPolicy | None:  # fmt: skip
        """Expire contexts after `expire_after` seconds without a write, and/or keep only
        the latest `keep_latest` events of each (both None removes the policy; the policy
        at the scope is replaced whole): for one context, a tenant's contexts, or every
        context (`everything`); the most specific policy applies. An expiry under an hour
        is refused unless `force`. A policy under which the next sweep would remove
        anything is refused with RetentionConfirmationError, holding the plan of what it
        would remove, unless `yes`. Raises InvalidOperationError, ContextNotFoundError."""
        check_expiry(expire_after, force)
        scope = self._scope(tenant, context_id, everything)
        if not yes and (expire_after is not None or keep_latest is not None):
            plan = self._preview(scope, expire_after, keep_latest)
            if not plan.empty():
                raise RetentionConfirmationError(
                    f"under this policy the next sweep would {plan.summary()} "
                    "(`ctxstore serve` sweeps every minute): pass yes=True (--yes) to set it",
                    plan,
                )
        retention = self._core.retention
        retention.set(scope, expire_after, keep_latest, self._core.actor(actor))
        return retention.policies().get(scope)

    def _scope(self, tenant: str | None, context_id: UUID | str | None, everything: bool) -> str:
        cid = None
        if context_id is not None:
            cid = self._core.id(context_id)
            self._core.tenant_of(cid)  # raises ContextNotFoundError
        return scope_of(tenant=tenant, context_id=cid, everything=everything)

    def retention_policy(
        self, *, tenant: str | None = None, context_id: UUID | str | None = None,
        everything: bool = False,
    ) -> RetentionPolicy | None:  # fmt: skip
        """The policy set at exactly this scope, if any."""
        scope = self._scope(tenant, context_id, everything)
        return self._core.retention.policies(fresh=True).get(scope)

    def retention_preview(
        self, expire_after: float | None, *, keep_latest: int | None = None,
        tenant: str | None = None, context_id: UUID | str | None = None,
        everything: bool = False,
    ) -> RetentionPlan:  # fmt: skip
        """What the next sweep would remove under this policy (replacing the one at its
        scope; the other policies as they are), per context: what to confirm before
        setting it. Removes nothing."""
        scope = self._scope(tenant, context_id, everything)
        return self._preview(scope, expire_after, keep_latest)

    def _preview(
        self, scope: str, expire_after: float | None, keep_latest: int | None
    ) -> RetentionPlan:
        policies = dict(self._core.retention.policies(fresh=True))
        policies[scope] = RetentionPolicy(
            scope=scope, expire_after=expire_after, keep_latest=keep_latest,
            set_at=datetime.now(UTC), actor="preview",
        )  # fmt: skip
        return sweeping.planned(self._core, policies).under(scope)

    def would_expire(
        self, expire_after: float | None, *, tenant: str | None = None,
        context_id: UUID | str | None = None, everything: bool = False,
    ) -> list[UUID]:  # fmt: skip
        """The contexts a sweep would erase now if this expiry were set (keeping the
        scope's bound): see `retention_preview` for everything it would remove."""
        scope = self._scope(tenant, context_id, everything)
        current = self._core.retention.policies(fresh=True).get(scope)
        keep = None if current is None else current.keep_latest
        return [e.context_id for e in self._preview(scope, expire_after, keep).expire]

    def sweep_plan(self) -> RetentionPlan:
        """What a sweep would remove now, per context (erasures and history bounds),
        removing nothing (`sweep --dry-run`)."""
        return sweeping.planned(self._core)

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

    # ---- keys --------------------------------------------------------------------------------

    def _cipher(self) -> ContextCipher:
        keys = self._core.storage.keys
        if keys is None:
            raise InvalidOperationError(
                "this store is not encrypted: set CTXSTORE_ENCRYPTION_KEY, CTXSTORE_KEY_FILE "
                "or CTXSTORE_KMS"
            )
        if self._core.storage.backend.name == "memory":
            raise InvalidOperationError("a memory:// store holds nothing at rest")
        return keys

    def _data_keys(self) -> DataKeys:
        return self._cipher().keys

    def encrypt_in_place(
        self, *, batch: int = RESEAL_BATCH, progress: Callable[[int], None] | None = None
    ) -> Resealing:
        """Seal every stored event and snapshot with its context's data key: a store written
        without encryption (or with one store-wide key) becomes encrypted in place. Safe to
        interrupt and to run again; readers and writers go on meanwhile. Raises
        InvalidOperationError when the store has no key."""
        cipher = self._cipher()
        audit.catch_up(self._core)
        contexts = [UUID(h) for h in sorted(self._core.storage.audit_index.indexed_heads())]
        storage = self._core.storage
        done = reseal(storage, cipher, contexts, batch=batch, progress=progress, scrub=False)
        blobs = storage.blobs.seal_all()  # attachments, each under a key of its own
        residue = done.residue
        if done.events or done.snapshots or blobs:  # what the plain states left behind
            residue = storage.backend.scrub(storage.recorder)
        return done.model_copy(update={"attachments": blobs, "residue": residue})

    def rekey(
        self, context_id: UUID | str, *, wait: float | None = None,
        waiting: Callable[[float, float], None] | None = None,
    ) -> Resealing:  # fmt: skip
        """A new data key for a context, its states sealed anew, the old key dropped once
        every process's cache has had `wait` seconds (default CTXSTORE_KEY_CACHE_SECONDS)
        to learn of it (`waiting(waited, to_wait)` hears of the wait about once a second).
        Raises ContextNotFoundError, InvalidOperationError."""
        cipher = self._cipher()
        cid = self._core.id(context_id)
        self._core.tenant_of(cid)  # raises ContextNotFoundError
        return rekey(self._core.storage, cipher, cid, wait=wait, waiting=waiting)

    def key_status(self) -> KeyStatus:
        """Where the store's keys are; raises InvalidOperationError when it has none."""
        keys = self._data_keys()
        return KeyStatus(
            kek=keys.kek.current_id, vault=keys.vault.where, apart=keys.vault.apart,
            by_kek=keys.vault.kek_counts(),
        )  # fmt: skip

    def rotate_kek(
        self, *, batch: int = BATCH, progress: Callable[[int], None] | None = None
    ) -> KekRotation:
        """Re-wrap every data key under the current KEK, online (adapters/keys/rotation.py);
        raises InvalidOperationError when the store is not encrypted."""
        return rotate_kek(self._data_keys(), batch=batch, progress=progress)


__all__ = ["KeyStatus", "StoreAdmin"]
