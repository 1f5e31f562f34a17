"""The history of a context: one entry per event, with rollbacks marking what they undid."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict

from ctxstore.domain.context import Context
from ctxstore.domain.errors import InvalidOperationError
from ctxstore.domain.streaming import delta_chars
from ctxstore.projections.changes import Change, apply_event
from ctxstore.projections.what import what_it_did

EVENT_TYPES: dict[str, str] = {
    "ContextCreated": "create",
    "MessagesInserted": "insert",
    "MessagesDeleted": "delete",
    "MessageReplaced": "replace",
    "MessagesCompressed": "compress",
    "SummaryExpanded": "expand",
    "BatchStarted": "batch_start",
    "BatchEnded": "batch_end",
    "UsageRecorded": "usage",
    "ContextForked": "fork",
    "MessageBegun": "begin",
    "MessageDeltas": "append",
    "MessageFinished": "finish",
    "MessageAbandoned": "abandon",
    "HistoryRemoved": "retention",
}


def event_type_filter(types: str | Sequence[str] | None) -> list[str] | None:
    """Event type names to filter by, checked; raises InvalidOperationError naming unknowns."""
    if types is None:
        return None
    wanted = [types] if isinstance(types, str) else types
    if not isinstance(wanted, list | tuple) or not all(isinstance(t, str) for t in wanted):
        raise InvalidOperationError(f"types must be event type names, got {types!r:.80}")
    known = set(EVENT_TYPES.values())
    unknown = sorted(set(wanted) - known)
    if unknown:
        raise InvalidOperationError(f"unknown event type(s) {unknown}; known: {sorted(known)}")
    return list(wanted)


class HistoryEntry(BaseModel):
    """One event as an operator reads it."""

    model_config = ConfigDict(frozen=True)

    version: int
    timestamp: datetime
    type: str  # create, insert, delete, replace, compress, expand, batch_start, batch_end, usage,
    # fork, begin, append, finish, abandon
    actor: str
    batch: int
    reverted: bool  # a later batch_end rolled it back
    reverted_by: int | None  # version of that batch_end
    message_ids: list[str]
    details: dict[str, Any]
    changes: Change | None = None  # what it changed in the visible context, where asked for
    # The id of the command that stored it: what an OutcomeUnknownError names, so a caller
    # can tell whether that write is here (None for events stored before command ids).
    command_id: str | None = None


_HEADER = ("originator_id", "originator_version", "timestamp", "actor", "batch")


class TailEvent(BaseModel):
    """One stored event as a live tail delivers it: what the history says of it, and
    what it recorded (`payload`: the messages inserted, the deltas appended, ...)."""

    model_config = ConfigDict(frozen=True)

    context_id: UUID
    version: int
    type: str
    timestamp: datetime
    actor: str
    batch: int
    message_ids: list[str]
    details: dict[str, Any]
    payload: dict[str, Any]
    what: str = ""  # what it did, in a line (projections/what.py)


def tail_event(e: Context.Event) -> TailEvent:
    batch, ids, details = describe_event(e)
    return TailEvent(
        context_id=e.originator_id, version=e.originator_version,
        type=EVENT_TYPES[type(e).__name__], timestamp=e.timestamp,
        actor=getattr(e, "actor", ""), batch=batch, message_ids=ids, details=details,
        payload={k: v for k, v in vars(e).items() if k not in _HEADER},
        what=what_it_did(e),
    )  # fmt: skip


def describe_event(e: Context.Event) -> tuple[int, list[str], dict[str, Any]]:
    """The batch an event ran in, the message ids it touched, and its other facts."""
    if isinstance(e, Context.ContextCreated):
        facts = {"name": e.name, "metadata": e.metadata, "encoding": e.encoding}
        return 0, [], facts if e.tenant is None else {**facts, "tenant": e.tenant}
    if isinstance(e, Context.MessagesInserted):
        return (
            e.batch,
            [m["id"] for m in e.messages],
            {"after_id": e.after_id, "tokens": sum(e.tokens), "estimated": e.estimated},
        )
    if isinstance(e, Context.MessagesDeleted):
        return e.batch, list(e.ids), {}
    if isinstance(e, Context.MessageReplaced):
        return e.batch, [e.id], {"tokens": e.tokens, "estimated": e.estimated}
    if isinstance(e, Context.MessagesCompressed):
        return (
            e.batch,
            list(e.ids),
            {
                "summary_id": e.summary["id"],
                "tokens_before": e.tokens_before,
                "tokens_after": e.tokens,
                "estimated": e.estimated,
                "stats": e.stats,
            },
        )
    if isinstance(e, Context.SummaryExpanded):
        restored = [x["message"]["id"] for x in e.entries]
        return (
            e.batch,
            restored,
            {"summary_id": e.id, "tokens": sum(x["tokens"] for x in e.entries)},
        )
    if isinstance(e, Context.BatchStarted):
        return e.batch - 1, [], {"opened": e.batch}
    if isinstance(e, Context.UsageRecorded):
        timed = {} if e.latency_ms is None else {"latency_ms": e.latency_ms}  # where measured
        return (
            e.batch,
            [],
            {
                "for_version": e.for_version,
                "model": e.model,
                "prompt_tokens": e.prompt_tokens,
                "completion_tokens": e.completion_tokens,
                "counted_tokens": e.counted_tokens,
                "estimated": e.estimated,
                "sent": None if e.sent is None else len(e.sent),
            }
            | timed
            | _captured(e.call),
        )
    if isinstance(e, Context.ContextForked):
        return (
            0,
            [x["message"]["id"] for x in e.entries],
            {"source_id": e.source_id, "source_version": e.source_version},
        )
    if isinstance(e, Context.MessageBegun):
        begun = {"after_id": e.after_id, "tokens": e.tokens, "estimated": e.estimated}
        return e.batch, [e.message["id"]], begun
    if isinstance(e, Context.MessageDeltas):
        return e.batch, [e.id], {"deltas": len(e.deltas), "chars": delta_chars(e.deltas),
                                 "tokens": e.tokens}  # fmt: skip
    if isinstance(e, Context.MessageFinished):
        done = {"tokens": e.tokens, "estimated": e.estimated, "final": e.message is not None}
        return e.batch, [e.id], done
    if isinstance(e, Context.MessageAbandoned):
        return e.batch, [e.id], {"reason": e.reason, "keep": e.keep}
    if isinstance(e, Context.BatchEnded):
        return e.batch, [], {"to": e.to, "keep": e.keep, "reverts_from": e.reverts_from}
    if isinstance(e, Context.HistoryRemoved):
        removed = {"removed_versions": [2, e.originator_version - 1], "keep_latest": e.keep_latest}
        return e.batch, [], removed
    raise TypeError(f"not a Context event: {type(e).__name__}")


def _captured(call: Any) -> dict[str, Any]:
    """What the audit index keeps of a captured call: who captured it and how it ended,
    not its bodies (a call reads them from its event)."""
    if call is None:
        return {}
    kept = ("call_id", "source", "api", "error", "streamed", "started_at", "reconstructed")
    return {"captured": {k: call[k] for k in kept if k in call}}


def fold_history(events: Iterable[Context.Event], *, changes: bool = False) -> list[HistoryEntry]:
    """Every event in order; a rollback marks each event since its batch opened as reverted.

    With `changes`, the events are also replayed (from the first) to say what each changed
    in the visible context.
    """
    rows: list[dict[str, Any]] = []
    ctx: Context | None = None
    calls = 0
    for e in events:
        batch, ids, details = describe_event(e)
        if isinstance(e, Context.UsageRecorded):
            calls += 1
            details["call"] = calls
        row = {
            "version": e.originator_version,
            "timestamp": e.timestamp,
            "type": EVENT_TYPES[type(e).__name__],
            "actor": getattr(e, "actor", ""),
            "batch": batch,
            "reverted": False,
            "reverted_by": None,
            "message_ids": ids,
            "details": details,
            "command_id": getattr(e, "command", None),
        }
        if changes:
            ctx, row["changes"] = apply_event(ctx, e)
        rows.append(row)
        if isinstance(e, Context.BatchEnded) and e.reverts_from is not None:
            # Rows are in version order: walk back to the batch's start.
            for i in range(len(rows) - 2, -1, -1):
                row = rows[i]
                if row["version"] < e.reverts_from:
                    break
                if not row["reverted"]:
                    row["reverted"] = True
                    row["reverted_by"] = e.originator_version
    return [HistoryEntry(**r) for r in rows]
