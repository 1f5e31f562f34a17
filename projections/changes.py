"""What each event changed in the visible context, and the difference between two versions.

`apply_event` folds one event onto an aggregate and says what it added, removed and
changed; most events say so themselves, and only a rollback needs a comparison of the
whole visible context before and after.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from ctxstore.domain.context import JSON, Context
from ctxstore.domain.messages import stored_call_parts
from ctxstore.domain.shapes import texts_of

PREVIEW_CHARS = 160


class MessageBrief(BaseModel):
    """A message as a change lists it; `message` is its whole JSON where asked for."""

    model_config = ConfigDict(frozen=True)

    id: str
    role: str
    tokens: int
    preview: str
    message: dict[str, Any] | None = None


class Change(BaseModel):
    """Messages a step added to, removed from and changed in the visible context."""

    model_config = ConfigDict(frozen=True)

    added: list[MessageBrief] = []
    removed: list[MessageBrief] = []
    changed: list[MessageBrief] = []  # as they are after the step
    tokens_delta: int = 0  # visible tokens after minus before

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed)


class Diff(BaseModel):
    """The difference between two versions of one context."""

    model_config = ConfigDict(frozen=True)

    context_id: str
    from_version: int
    to_version: int
    added: list[MessageBrief]
    removed: list[MessageBrief]
    changed: list[tuple[MessageBrief, MessageBrief]]  # (before, after), same id
    tokens_before: int
    tokens_after: int
    tokens_delta: int


def part_preview(part: JSON) -> str:
    """One content part in a line: its text, else its type in brackets ([image_url])."""
    text = part.get("text")
    return text if isinstance(text, str) else f"[{part.get('type') or 'part'}]"


def preview(message: JSON) -> str:
    """The message's text in one line, or the calls it makes."""
    if message.get("native") is not None:
        return _clipped(" ".join(" ".join(texts_of(message["native"], message["format"])).split()))
    content = message.get("content")
    if isinstance(content, list):  # text parts as they read, other parts by their type
        content = " ".join(part_preview(p) for p in content if isinstance(p, dict))
    text = " ".join(str(content or "").split())
    calls = [stored_call_parts(c)[0] for c in message.get("tool_calls") or []]
    if calls:
        text = (text + " " if text else "") + "[calls " + ", ".join(calls) + "]"
    return _clipped(text)


def _clipped(text: str) -> str:
    return text[: PREVIEW_CHARS - 1] + "…" if len(text) > PREVIEW_CHARS else text


def brief(entry: JSON, *, full: bool = False) -> MessageBrief:
    m = entry["message"]
    return MessageBrief(
        id=m["id"],
        role=m["role"],
        tokens=int(entry["tokens"]),
        preview=preview(m),
        message=m if full else None,
    )


def compare(
    before: tuple[list[str], dict[str, JSON]],
    after: tuple[list[str], dict[str, JSON]],
    *,
    full: bool = False,
) -> tuple[list[MessageBrief], list[MessageBrief], list[tuple[MessageBrief, MessageBrief]]]:
    """Added, removed and changed messages between two visible states (order, entries)."""
    (old_order, old), (new_order, new) = before, after
    added = [brief(new[i], full=full) for i in new_order if i not in old]
    removed = [brief(old[i], full=full) for i in old_order if i not in new]
    changed = [
        (brief(old[i], full=full), brief(new[i], full=full))
        for i in new_order
        if i in old and old[i] is not new[i] and old[i]["version"] != new[i]["version"]
    ]
    return added, removed, changed


def apply_event(ctx: Context | None, event: Context.Event) -> tuple[Context, Change]:
    """Fold one event onto the aggregate; returns it and what the step changed."""
    tokens = 0 if ctx is None else ctx.tokens
    gone: list[MessageBrief] = []
    saved: tuple[list[str], dict[str, JSON]] | None = None
    if ctx is not None:
        if isinstance(event, Context.MessagesDeleted | Context.MessagesCompressed):
            gone = [brief(ctx.entries[i]) for i in event.ids]
        elif (
            isinstance(event, Context.MessageAbandoned)
            and not event.keep
            or isinstance(event, Context.SummaryExpanded)
        ):
            gone = [brief(ctx.entries[event.id])]
        elif (
            isinstance(event, Context.BatchEnded)
            and not event.keep
            or isinstance(event, Context.HistoryRemoved)
        ):
            saved = (list(ctx.order), dict(ctx.entries))
    after = event.mutate(ctx)
    assert after is not None
    entries = after.entries
    if isinstance(event, Context.MessagesInserted):
        change = Change(added=[brief(entries[m["id"]]) for m in event.messages])
    elif isinstance(event, Context.MessageBegun):
        change = Change(added=[brief(entries[event.message["id"]])])
    elif isinstance(event, Context.MessageDeltas | Context.MessageFinished):
        change = Change(changed=[brief(entries[event.id])])
    elif isinstance(event, Context.MessageAbandoned):
        change = Change(changed=[brief(entries[event.id])]) if event.keep else Change(removed=gone)
    elif isinstance(event, Context.ContextForked):
        change = Change(added=[brief(entries[i]) for i in after.order])
    elif isinstance(event, Context.MessageReplaced):
        change = Change(changed=[brief(entries[event.id])])
    elif isinstance(event, Context.MessagesDeleted):
        change = Change(removed=gone)
    elif isinstance(event, Context.MessagesCompressed):
        change = Change(added=[brief(entries[event.summary["id"]])], removed=gone)
    elif isinstance(event, Context.SummaryExpanded):
        restored = [brief(entries[x["message"]["id"]]) for x in event.entries]
        change = Change(added=restored, removed=gone)
    elif saved is not None:
        added, removed, changed = compare(saved, (after.order, entries))
        change = Change(added=added, removed=removed, changed=[a for _, a in changed])
    else:
        change = Change()
    if change.empty:
        return after, change
    return after, change.model_copy(update={"tokens_delta": after.tokens - tokens})
