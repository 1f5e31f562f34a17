"""Erasure: a user's right to be forgotten in an append-only store.

With encryption (keys per context, adapters/keys/) erasure is crypto-shredding: the
context's data key is destroyed, so its rows are ciphertext no one can open in any copy —
table files, write-ahead logs, replicas, backups. Its rows are deleted as well.

Erasing a context deletes every row that holds its contents — its events, its snapshots,
its audit-index rows and the idempotent responses of its requests — in one transaction, and
writes an erasure record (which context, whose, by whom, why, when, how many events) to
`ctxstore_erasures`, which names no content. Other contexts are untouched: each context's
hash chain is its own, so they still verify.

On SQLite the deletion overwrites the freed pages (secure_delete) and the write-ahead log is
checkpointed and truncated, so the contents leave the file. On PostgreSQL the rows are
deleted and the tables vacuumed; PostgreSQL's own write-ahead log and any backups keep the
old pages until they are recycled, which is why erasure should be paired with encryption at
rest and backup rotation (docs/explanation/reliability.md).

Attachments (stored once per tenant by their hash) go with the last context that refers to
them: erasing releases the context's references, and a blob no other context refers to is
deleted (a blob another context still shows stays: it is that context's content too).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from uuid import UUID

from ctxstore.adapters.keys.cipher import ContextCipher, key_name
from ctxstore.adapters.storage.backend import driver_errors
from ctxstore.adapters.storage.erasers import Eraser
from ctxstore.adapters.store.core import StoreCore
from ctxstore.adapters.store.faults import fault
from ctxstore.adapters.store.results import Erasure
from ctxstore.adapters.store.write_attempt import Next, settled
from ctxstore.domain.context import Context
from ctxstore.domain.errors import InvalidOperationError, first_line
from ctxstore.domain.limits import column_text, text_problem

log = logging.getLogger(__name__)


def forks_of(core: StoreCore, cid: UUID) -> list[UUID]:
    """The contexts that hold copies of `cid`'s messages: its forks, their forks, ... (in
    the order they were made; erased ones are gone from the events)."""
    children: dict[UUID, list[UUID]] = {}
    for e in core.all_of(Context.ContextForked):
        assert isinstance(e, Context.ContextForked)
        children.setdefault(UUID(e.source_id), []).append(e.originator_id)
    found: list[UUID] = []
    todo = list(children.get(cid, []))
    while todo:
        fork = todo.pop(0)
        if fork not in found:
            found.append(fork)
            todo.extend(children.get(fork, []))
    return found


def erase_context(
    core: StoreCore, context_id: UUID | str, *, actor: str, reason: str,
    with_forks: bool | None = None,
) -> Erasure:  # fmt: skip
    """Erase a context's contents for good; returns the record left in their place.

    Forks hold copies of its messages: with none, erasing goes ahead; with some, it is
    refused unless `with_forks` says what to do — True erases them too (each leaves its own
    record, and this record names them), False leaves them (this record's residue names
    them)."""
    if text_problem(reason, 1000):
        raise InvalidOperationError(
            "an erasure needs a reason (1-1000 characters, no NUL or lone surrogates)"
        )
    cid = core.id(context_id)
    core.tenant_of(cid)  # raises ContextNotFoundError
    forks = forks_of(core, cid)
    if forks and with_forks is None:
        named = ", ".join(str(f) for f in forks[:5]) + (" ..." if len(forks) > 5 else "")
        raise InvalidOperationError(
            f"context {cid} has {len(forks)} fork(s) holding copies of its messages ({named}): "
            "erase them too (with_forks=True, --with-forks) or keep them (with_forks=False, "
            "--keep-forks)"
        )
    eraser = core.storage.eraser()
    erased: list[UUID] = []
    if with_forks:
        for fork in reversed(forks):  # the newest copies first: a failure leaves the source
            _erase_one(
                core, eraser, _record(core, fork, actor, f"erased with {cid}: {reason.strip()}")
            )
            erased.append(fork)
    record = _record(core, cid, actor, reason.strip())
    record = record.model_copy(update={"forks": list(reversed(erased))})
    done = _erase_one(core, eraser, record)
    if forks and not with_forks:
        kept = ", ".join(str(f) for f in forks)
        return done.model_copy(
            update={"residue": [*done.residue, f"forks kept, holding copies: {kept}"]}
        )
    return done


def _erase_one(core: StoreCore, eraser: Eraser, record: Erasure) -> Erasure:
    """Delete one context's rows, then destroy its data key (when the store has keys)."""
    cid, keys = record.context_id, core.storage.keys
    if keys is not None:
        record = record.model_copy(update={"shredded": True, "residue": shred_residue(keys)})
    try:
        done = eraser.erase(record)
    except driver_errors() as exc:
        done = _settled(eraser, record, exc)
    # Past the commit point: the erasure stands. What fails from here is said in the
    # record returned (and logged), never reported as the erasure's failure: a caller
    # retrying it would only hear that the context is not found.
    left: list[str] = []
    try:
        core.storage.blobs.release(cid)
    except driver_errors() as exc:
        left.append(_failed(cid, "releasing its attachments", exc, UNRELEASED))
    if keys is not None:
        try:
            keys.keys.destroy([key_name(cid)])
        except driver_errors() as exc:
            left.append(_failed(cid, "destroying its data key", exc, UNSHREDDED))
            done = done.model_copy(update={"shredded": False})
    if core.storage.retention is not None:
        try:
            core.storage.retention.drop_checkpoint(cid.hex)
        except driver_errors() as exc:  # a checkpoint of an erased context holds no content
            log.warning("erasure of %s: stored; dropping its retention checkpoint failed: %s",
                        cid, exc)  # fmt: skip
    core.bounds.forget(cid)
    core.forget(cid)
    return done.model_copy(update={"residue": [*done.residue, *left]}) if left else done


UNRELEASED = (
    "its attachments' references were kept: the attachments only it referred to are still "
    "stored (their bytes, under keys of their own)"
)
UNSHREDDED = (
    "its data key was not destroyed: the erased rows' leftovers in write-ahead logs, "
    "replicas and backups can still be opened with it"
)


def _failed(cid: UUID, step: str, exc: BaseException, left: str) -> str:
    log.warning("erasure of %s: stored; %s failed: %s", cid, step, exc)
    return f"{step} failed after the erasure was stored ({first_line(exc)}): {left}"


def _settled(eraser: Eraser, record: Erasure, exc: BaseException) -> Erasure:
    """An erasure whose transaction failed with `exc`, settled (write_attempt.settle): its
    stored record when its commit went through (the reply alone was lost), else the
    failure; OutcomeUnknownError when the records cannot be read to tell."""
    found: list[Erasure] = []

    def mine(_version: int) -> bool:
        found[:] = [
            r for r in eraser.records()
            if r.context_id == record.context_id
            and abs(r.erased_at.timestamp() - record.erased_at.timestamp()) < 1e-5
        ]  # fmt: skip
        return bool(found)

    when = record.erased_at.isoformat()
    if settled(record.context_id, 0, exc, f"erasure at {when}", mine) is not Next.STORED:
        raise fault(exc) from exc  # not stored (another writer's row met: settle said so)
    return found[0].model_copy(update={"shredded": record.shredded})


def shred_residue(keys: ContextCipher) -> list[str]:
    """What may still open an erased context once its key is destroyed: old copies of the
    vault, with the KEK that wrapped the key then."""
    vault = keys.keys.vault
    kek = keys.keys.kek.current_id
    where = "its write-ahead log, replicas and backups" if not vault.apart else "its backups"
    return [
        (
            f"crypto-shredded: the data key is destroyed in {vault.where}; the erased rows' "
            "leftovers in table files, write-ahead logs, replicas and backups are ciphertext "
            f"without a key. Copies of {vault.where} made before the erasure ({where}) still "
            f"hold the key wrapped by KEK {kek}: rotate the KEK and remove the old one "
            "(`ctxstore keys rotate`) to make them useless"
        ),
        (
            "attachments: each is under a key of its own, which this context held sealed with "
            "its data key; those only it referred to are deleted and open from no copy; those "
            "other contexts refer to stay theirs (attachments stored before keys per "
            "attachment are under the store's key and stay readable in older copies)"
        ),
    ]


def _record(core: StoreCore, cid: UUID, actor: str, reason: str) -> Erasure:
    tenant = core.tenant_of(cid)
    return Erasure(
        context_id=cid, tenant=None if tenant is None else column_text(tenant),
        erased_at=datetime.now(UTC), actor=actor, reason=reason[:1000], events=0, snapshots=0,
    )  # fmt: skip
