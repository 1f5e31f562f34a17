"""The checks of the two commands that put a summary in and take it out again: compress (one
summary in place of a contiguous run) and expand (the run back in the summary's place).

Pure functions over a context's reads; the aggregate triggers the events.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any
from uuid import UUID

from ctxstore.domain.context_reads import JSON, ContextReads, MessageRef
from ctxstore.domain.errors import (
    DamagedContextError,
    InvalidOperationError,
    MalformedTranscriptError,
    UnknownMessageError,
)
from ctxstore.domain.message_input import parse_message
from ctxstore.domain.messages import Message
from ctxstore.domain.shapes import RESULT_ROLES
from ctxstore.domain.transcript import check_transcript, pairing_closure_violation

MAX_HOPS = 1000  # replacements, expansions and forks followed before giving up
StateAt = Callable[[UUID, int], Any]  # a context's state at a version (a Context)


def covered_entries(cid: UUID, ctx: Any, summary_id: str, state_at: StateAt) -> list[JSON]:
    """The entries the visible summary `summary_id` covers, as they were when it was written
    (each with "from": the context and version of the event that wrote it), found in the
    state just before that event: a replaced summary is followed back to where it was
    written, a restored one to where it came from, a fork's to its source. [] when it is
    not a summary (expand says so)."""
    covered = ctx.covered_by(summary_id)
    if not covered:
        return []
    source, entry = cid, ctx.entries[summary_id]
    for _ in range(MAX_HOPS):
        if "from" in entry:  # restored by an expansion: written where it came from
            source, version = UUID(entry["from"]["context_id"]), int(entry["from"]["version"])
        else:
            version = int(entry["version"])
        before = state_at(source, version - 1)
        if all(before.has_message(i) for i in covered):
            return [written_entry(source, before.entries[i]) for i in covered]
        if before.has_message(summary_id):  # replaced at `version`: written earlier
            entry = before.entries[summary_id]
            continue
        forked = state_at(source, version).forked_from
        if forked is None or before.forked_from is not None:
            break
        source = UUID(forked["context_id"])  # came with the fork: as the source held it
        entry = state_at(source, int(forked["version"])).entries[summary_id]
    raise DamagedContextError(
        f"context {cid}: the messages summary {summary_id!r} covers are not in its history"
    )


def written_entry(source: UUID, entry: JSON) -> JSON:
    """An entry as an expansion carries it: its message and counts, and where it was written."""
    written = entry.get("from") or {"context_id": source.hex, "version": entry["version"]}
    return {
        "message": entry["message"], "tokens": entry["tokens"], "estimated": entry["estimated"],
        "summary_of": entry["summary_of"], "from": written,
    }  # fmt: skip


def covered_run(ctx: Any, ids: Sequence[str]) -> list[str]:
    """The visible ids a compress of `ids` covers, in order; raises when they are not a
    contiguous run or would split a tool call from its result."""
    positions = sorted(ctx.order.index(i) for i in ids)
    if positions[-1] - positions[0] + 1 != len(positions):
        gaps = [ctx.order[p] for p in range(positions[0], positions[-1]) if p not in positions]
        raise InvalidOperationError(
            f"compress needs a contiguous run of visible messages; {gaps} lie between"
        )
    covered: list[str] = ctx.order[positions[0] : positions[-1] + 1]
    problem = ctx.checks_transcript and pairing_closure_violation(
        set(covered), ctx.order, ctx._messages_by_id()
    )
    if problem:
        raise MalformedTranscriptError(
            f"compress would split a tool call from its result: {problem}"
        )
    return covered


def summary_payload(summary: Message | JSON) -> Message:
    """A summary as a message; raises for a tool message or one making tool calls."""
    parsed = parse_message(summary)
    if parsed.role in RESULT_ROLES or parsed.tool_calls or parsed.function_call:
        raise InvalidOperationError("a summary cannot be a tool message or make tool calls")
    return parsed


def expanded_order(ctx: ContextReads, ref: MessageRef, entries: Sequence[JSON]) -> list[str]:
    """The visible order once the summary `ref` gives back the entries it covers; raises a
    typed error when it is not a summary, the entries are not what it covers, one of their
    ids is visible again, or the result is not a well-formed transcript."""
    summary_id = ctx.resolve(ref)
    covered = ctx.covered_by(summary_id)
    if not covered:
        raise InvalidOperationError(f"message {summary_id!r} is not a summary: nothing to expand")
    if [e["message"]["id"] for e in entries] != covered:
        raise UnknownMessageError(
            f"summary {summary_id!r} covers {covered}; the messages found to restore differ"
        )
    back = [i for i in covered if i in ctx.entries]
    if back:
        raise InvalidOperationError(
            f"summary {summary_id!r} cannot be expanded: {back} are visible again"
        )
    at = ctx.order.index(summary_id)
    order = [*ctx.order[:at], *covered, *ctx.order[at + 1 :]]
    restored = {e["message"]["id"]: e["message"] for e in entries}
    if not ctx.checks_transcript:
        return order
    try:
        check_transcript(
            (i, restored[i] if i in restored else ctx.stored_message(i)) for i in order
        )
    except MalformedTranscriptError as exc:
        raise MalformedTranscriptError(
            f"expanding summary {summary_id!r} would not give a well-formed transcript: {exc}"
        ) from None
    return order
