"""What an event did, in one line a person reads: the first words of what it wrote, what a
compaction covered, which batch a rollback closed and what it undid, a call's model and
tokens. The live tail carries it, `ctxstore tail` prints it, the web view's timeline shows it."""

from __future__ import annotations

from ctxstore.domain.context import JSON, Context
from ctxstore.domain.streaming import delta_chars
from ctxstore.projections.changes import preview


def what_it_did(e: Context.Event) -> str:
    """One line saying what the event did."""
    if isinstance(e, Context.ContextCreated):
        return f"created “{e.name}”" if e.name else "created"
    if isinstance(e, Context.MessagesInserted):
        return _first_of(e.messages)
    if isinstance(e, Context.MessagesDeleted):
        return f"deleted {', '.join(e.ids)}"
    if isinstance(e, Context.MessageReplaced):
        return f"{e.id} → {preview(e.message)}"
    if isinstance(e, Context.MessagesCompressed):
        return (
            f"{len(e.ids)} messages → summary: {preview(e.summary)} "
            f"({e.tokens_before:,} → {e.tokens:,} tokens)"
        )
    if isinstance(e, Context.SummaryExpanded):
        return f"summary {e.id} expanded back into {len(e.entries)} messages"
    if isinstance(e, Context.BatchStarted):
        return f"opened batch {e.batch}"
    if isinstance(e, Context.BatchEnded):
        if e.keep:
            return f"closed batch {e.batch}, kept" + (
                f" (down to {e.to})" if e.to < e.batch - 1 else ""
            )
        closed = f"batch {e.batch}" if e.to == e.batch - 1 else f"batches {e.batch}–{e.to + 1}"
        return (
            f"closed {closed}, rolled back to batch {e.to}: undid "
            f"v{e.reverts_from}–v{e.originator_version - 1}"
        )
    if isinstance(e, Context.UsageRecorded):
        took = "" if e.latency_ms is None else f" in {e.latency_ms:,.0f} ms"
        return (
            f"call: {e.model}, {e.prompt_tokens:,} in / {e.completion_tokens:,} out{took}, "
            f"made with v{e.for_version}"
        )
    if isinstance(e, Context.ContextForked):
        return f"forked from {e.source_id[:8]} at v{e.source_version} ({len(e.entries)} messages)"
    if isinstance(e, Context.MessageBegun):
        said = preview(e.message)
        return f"{e.message.get('role', 'assistant')} reply begins" + (f": {said}" if said else "")
    if isinstance(e, Context.MessageDeltas):
        n = len(e.deltas)
        return f"streamed {delta_chars(e.deltas):,} chars in {n} delta{'s' * (n != 1)} into {e.id}"
    if isinstance(e, Context.MessageFinished):
        final = "" if e.message is None else f" as: {preview(e.message)}"
        return f"reply {e.id} finished{final} ({e.tokens:,} tokens)"
    if isinstance(e, Context.MessageAbandoned):
        why = f": {e.reason}" if e.reason else ""
        return f"reply {e.id} abandoned{why}" + (" (kept)" if e.keep else " (hidden)")
    if isinstance(e, Context.HistoryRemoved):
        return f"history before v{e.originator_version} removed (kept: the latest {e.keep_latest})"
    return ""


def _first_of(messages: list[JSON]) -> str:
    if not messages:
        return "nothing inserted"
    first = messages[0]
    more = f" (+{len(messages) - 1} more)" if len(messages) > 1 else ""
    return f"{first.get('role', first.get('type', 'message'))}: {preview(first)}{more}"
