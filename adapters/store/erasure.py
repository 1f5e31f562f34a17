"""Erasure: a user's right to be forgotten in an append-only store.

Erasing a context deletes every row that holds its contents — its events, its snapshots,
its audit-index rows and the idempotent responses of its requests — in one transaction, and
writes an erasure record (which context, whose, by whom, why, when, how many events) to
`ctxstore_erasures`, which names no content. Other contexts are untouched: each context's
hash chain is its own, so they still verify.

On SQLite the deletion overwrites the freed pages (secure_delete) and the write-ahead log is
checkpointed and truncated, so the contents leave the file. On PostgreSQL the rows are
deleted and the tables vacuumed; PostgreSQL's own write-ahead log and any backups keep the
old pages until they are recycled, which is why erasure should be paired with encryption at
rest and backup rotation (docs/reliability.md).
"""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import UUID

from ctxstore.adapters.store.core import StoreCore
from ctxstore.adapters.store.results import Erasure
from ctxstore.domain.errors import InvalidOperationError
from ctxstore.domain.limits import column_text, text_problem


def erase_context(core: StoreCore, context_id: UUID | str, *, actor: str, reason: str) -> Erasure:
    """Erase a context's contents for good; returns the record left in their place."""
    if text_problem(reason, 1000):
        raise InvalidOperationError(
            "an erasure needs a reason (1-1000 characters, no NUL or lone surrogates)"
        )
    cid = core.id(context_id)
    tenant = core.tenant_of(cid)  # raises ContextNotFoundError
    record = Erasure(
        context_id=cid, tenant=None if tenant is None else column_text(tenant), erased_at=datetime.now(UTC), actor=actor,
        reason=reason.strip(), events=0, snapshots=0,
    )  # fmt: skip
    done = core.storage.eraser().erase(record)
    core.forget(cid)
    return done
