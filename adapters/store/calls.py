"""Model calls recorded against a context, read through the audit index: the list is one
indexed query however long the history, and one call reads only its own stretch of events
(the usage record, what was written since the version it was made with) and the context at
two versions, each from its nearest snapshot."""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from ctxstore.adapters.store import audit
from ctxstore.adapters.store.captured import captured_reply, messages_sent
from ctxstore.adapters.store.core import StoreCore
from ctxstore.adapters.store.results import AuditEntry, ModelCall
from ctxstore.domain.context import Context
from ctxstore.domain.errors import DamagedContextError, InvalidOperationError
from ctxstore.domain.limits import strict_int
from ctxstore.domain.messages import Message
from ctxstore.projections.calls import call_of_entry, model_call


def call_entries(core: StoreCore, cid: UUID, *, index: bool = True) -> list[AuditEntry]:
    """The context's usage records in the audit index, oldest first (the index brought up
    to date first, where this store keeps it)."""
    found: list[AuditEntry] = []
    after = 0
    while True:
        page = audit.audit_page(
            core, types=["usage"], context_id=cid, after=after, limit=audit.MAX_PAGE,
            index=index and not found,
        )  # fmt: skip
        found += page.entries
        if not page.more:
            break
        after = int(page.cursor)  # one store's: a position
    if not found:
        core.require(cid)
    return found


def model_calls(core: StoreCore, context_id: UUID | str, *, index: bool = True) -> list[ModelCall]:
    """The model calls recorded against a context, numbered from 1 (without the messages)."""
    cid = core.id(context_id)
    return [call_of_entry(n, e) for n, e in enumerate(call_entries(core, cid, index=index), 1)]


def model_call_numbered(
    core: StoreCore, context_id: UUID | str, number: int, *, index: bool = True
) -> ModelCall:
    """Call `number` (1 the first, -1 the last) with exactly the messages it sent and the
    messages written for it (its response)."""
    cid = core.id(context_id)
    entries = call_entries(core, cid, index=index)
    n = _numbered(cid, number, len(entries))
    return _with_messages(core, cid, n, entries[n - 1])


def call_with_previous(
    core: StoreCore, context_id: UUID | str, number: int, *, index: bool = True
) -> tuple[ModelCall, ModelCall | None]:
    """Call `number` and the one before it, each with the messages it sent (the calls
    listed once for both)."""
    cid = core.id(context_id)
    entries = call_entries(core, cid, index=index)
    n = _numbered(cid, number, len(entries))
    call = _with_messages(core, cid, n, entries[n - 1])
    return call, None if n == 1 else _with_messages(core, cid, n - 1, entries[n - 2])


def _numbered(cid: UUID, number: int, recorded: int) -> int:
    """Call `number` as counted from 1 (-1: the last); refuses one the context lacks."""
    if not strict_int(number) or number == 0:
        raise InvalidOperationError(f"a call number is 1, 2, ... (or -1 the last), got {number!r}")
    if not -recorded <= number <= recorded:
        raise InvalidOperationError(
            f"context {cid} has {recorded} recorded call(s), not a call {number}"
        )
    return number if number > 0 else recorded + number + 1


def _with_messages(core: StoreCore, cid: UUID, n: int, entry: AuditEntry) -> ModelCall:
    listed = call_of_entry(n, entry)
    if listed.source is not None:  # captured: the call holds its reply, read nothing between
        stretch = list(core.storage.events.get(cid, gt=listed.version - 1, lte=listed.version))
    else:
        stretch = list(core.storage.events.get(cid, gt=listed.for_version, lte=listed.version))
    usage = stretch[-1] if stretch else None
    if not isinstance(usage, Context.UsageRecorded) or usage.originator_version != entry.version:
        raise DamagedContextError(
            f"context {cid}: the audit index names a model call at version {entry.version} "
            "that its events do not hold (rebuild the index: ctxstore reindex)"
        )
    reply = captured_reply(usage.call)
    if reply is None:
        reply = _response(core, cid, usage, stretch)
    return model_call(n, usage, _sent(core, cid, usage), reply)


def _sent(core: StoreCore, cid: UUID, e: Context.UsageRecorded) -> list[Message]:
    captured = messages_sent(e.call)
    if captured is not None:
        return captured
    if e.sent is not None and all("message" in s for s in e.sent):  # (a captured call's)
        return [Message.model_validate(s["message"]) for s in e.sent]
    at = core.context_at(cid, e.for_version)
    if e.sent is None:
        return at.visible_messages()
    return [
        Message.model_validate(at.stored_message(s["id"]) if "id" in s else s["message"])
        for s in e.sent
    ]


def _response(
    core: StoreCore, cid: UUID, e: Context.UsageRecorded, stretch: Sequence[object]
) -> list[Message]:
    """The messages written after the call's version and up to its usage record, as they
    stood then (a reply streamed in reads whole)."""
    ids: list[str] = []
    for x in stretch:
        if isinstance(x, Context.MessagesInserted):
            ids += [m["id"] for m in x.messages]
        elif isinstance(x, Context.MessageBegun):
            ids.append(x.message["id"])
    if not ids:
        return []
    at = core.context_at(cid, e.originator_version)
    return [Message.model_validate(at.stored_message(i)) for i in ids if at.has_message(i)]
