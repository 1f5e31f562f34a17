"""The Context aggregate: one event per operation on a conversation's context.

State is plain JSON (lists and dicts) so snapshots round-trip exactly:
- `order`: visible message ids in transcript order;
- `entries`: id -> {"message": <Message JSON>, "summary_of": [ids] | None, "version": int,
  "tokens": int, "estimated": bool};
- `tokens`, `estimated`: the visible messages' token sum, and how many of them are estimates;
- `savepoints`: one per open batch above 0, the visible state at the moment it opened.
Token counts are made once, when a command runs, and stored in its event: replay never
re-tokenizes.
Entries are never changed in place, so a savepoint is a shallow copy.
Commands check everything before they trigger an event (context_triggers.py); each event
class's apply() only applies it.
"""

from __future__ import annotations

from typing import Any, Self
from uuid import UUID

from eventsourcing.domain import Aggregate, event
from eventsourcing.domain import Snapshot as LibrarySnapshot
from eventsourcing.utils import get_topic

from ctxstore.domain.context_commands import ContextCommands
from ctxstore.domain.context_reads import (
    JSON,
    ContextReads,
    MessageRef,
    new_message_id,
    savepoints_as_stored,
)
from ctxstore.domain.context_streams import StreamCommands
from ctxstore.domain.errors import (
    InvalidOperationError,
)
from ctxstore.domain.limits import check_name, check_tenant
from ctxstore.domain.message_input import parse_json_object
from ctxstore.domain.streaming import (
    ABANDONED,
    apply_deltas,
    finalized,
    marked,
)

RECENT_CALLS = 256  # captured calls' ids a context remembers, to know a retried recording


class Context(ContextCommands, StreamCommands, ContextReads, Aggregate):
    """A conversation's context as an event-sourced aggregate."""

    class Snapshot(LibrarySnapshot):
        """The context's state, with each open batch's saved copy of a message stored
        once: where the context still holds that entry unchanged, the batch's entry is
        null. Without this, each open batch would repeat every visible message, and
        writing and reading a snapshot would cost as much again per batch. Snapshots taken
        before this (the library's class, every copy in full) read as they were."""

        @classmethod
        def take(cls, aggregate: Any) -> Self:
            snapshot = super().take(aggregate)
            snapshot.state["savepoints"] = savepoints_as_stored(snapshot.state)
            return snapshot

        @staticmethod
        def topic_of_context() -> str:
            return get_topic(Context)

        def mutate(self, _: None) -> Context:
            ctx = super().mutate(_)
            assert isinstance(ctx, Context)
            ctx.share_head_entries()
            return ctx

    class ContextCreated(Aggregate.Created):
        class_version = 2
        name: str | None
        metadata: JSON
        encoding: str
        actor: str
        tenant: str | None  # who owns it on a shared service; None: no tenant

        @staticmethod
        def upcast_v1_v2(state: JSON) -> None:
            state["tenant"] = None  # contexts from before tenants belong to none

    class MessagesInserted(Aggregate.Event):
        class_version = 1
        messages: list[JSON]
        tokens: list[int]
        estimated: bool
        after_id: str | None
        batch: int
        actor: str

        def apply(self, aggregate: Any) -> None:
            aggregate._place(self.messages, self.tokens, self.estimated, self.after_id)

    class MessagesDeleted(Aggregate.Event):
        class_version = 1
        ids: list[str]
        batch: int
        actor: str

        def apply(self, aggregate: Any) -> None:
            aggregate._hide(self.ids)

    class MessageReplaced(Aggregate.Event):
        class_version = 1
        id: str
        message: JSON
        tokens: int
        estimated: bool
        batch: int
        actor: str

        def apply(self, aggregate: Any) -> None:
            old = aggregate._drop_entry(self.id)
            aggregate._add_entry(
                self.message, self.tokens, self.estimated, summary_of=old["summary_of"]
            )

    class MessagesCompressed(Aggregate.Event):
        class_version = 1
        ids: list[str]
        summary: JSON
        tokens: int  # the summary's
        estimated: bool
        tokens_before: int  # the covered messages' sum
        stats: JSON
        batch: int
        actor: str

        def apply(self, aggregate: Any) -> None:
            order = aggregate.order
            at = order.index(self.ids[0])
            order[at : at + len(self.ids)] = [self.summary["id"]]
            for i in self.ids:
                aggregate._drop_entry(i)
            aggregate._add_entry(self.summary, self.tokens, self.estimated, summary_of=self.ids)

    class SummaryExpanded(Aggregate.Event):
        """A summary gives back the messages it covered, in its place."""

        class_version = 1
        id: str  # the summary's
        # In order: {"message", "tokens", "estimated", "summary_of", "from"}, "from" naming
        # the context and version of the event that first wrote the message.
        entries: list[JSON]
        batch: int
        actor: str

        def apply(self, aggregate: Any) -> None:
            order = aggregate.order
            at = order.index(self.id)
            order[at : at + 1] = [e["message"]["id"] for e in self.entries]
            aggregate._drop_entry(self.id)
            for e in self.entries:  # carried here; "from" says where each was first written
                aggregate._add_entry(
                    e["message"], e["tokens"], e["estimated"], summary_of=e["summary_of"]
                )
                aggregate.entries[e["message"]["id"]]["from"] = e["from"]

    class BatchStarted(Aggregate.Event):
        class_version = 1
        batch: int
        actor: str

        def apply(self, aggregate: Any) -> None:
            aggregate.savepoints.append(
                {
                    "batch": self.batch,
                    "version": aggregate.version + 1,
                    "order": list(aggregate.order),
                    "entries": dict(aggregate.entries),
                    "tokens": aggregate.tokens,
                    "estimated": aggregate.estimated,
                }
            )

    class BatchEnded(Aggregate.Event):
        class_version = 1
        batch: int  # the batch that was current when the command ran
        to: int  # the batch that is current afterwards
        keep: bool  # True: changes stay; False: rollback to the moment batch to+1 opened
        reverts_from: int | None  # first version undone by a rollback (batch to+1's start)
        actor: str

        def apply(self, aggregate: Any) -> None:
            if not self.keep:
                saved = aggregate.savepoints[self.to]
                aggregate.order = list(saved["order"])
                aggregate.entries = dict(saved["entries"])
                aggregate.tokens = saved["tokens"]
                aggregate.estimated = saved["estimated"]
            del aggregate.savepoints[self.to :]

    class UsageRecorded(Aggregate.Event):
        """A model call made with the context at `for_version`, as its provider billed it."""

        class_version = 4
        for_version: int
        model: str
        prompt_tokens: int  # the provider's figure
        completion_tokens: int
        counted_tokens: int  # ctxstore's count of what was sent
        estimated: bool
        # What was sent, in order: {"id": ...} names a message visible at for_version,
        # {"message": {...}} one the prompt builder wrote; None: the whole visible context.
        sent: list[JSON] | None
        batch: int
        actor: str
        latency_ms: float | None  # the call's duration as the caller measured it
        # A call captured as the provider received it (domain/captured.py): the request
        # and reply bodies, its source, id, start, error; None for a usage record.
        call: JSON | None

        @staticmethod
        def upcast_v1_v2(state: JSON) -> None:
            state["sent"] = None  # v1 calls sent the whole visible context

        @staticmethod
        def upcast_v2_v3(state: JSON) -> None:
            state["latency_ms"] = None  # v2 calls did not record their latency

        @staticmethod
        def upcast_v3_v4(state: JSON) -> None:
            state["call"] = None  # v3 calls were recorded by hand, not captured

        def apply(self, aggregate: Any) -> None:
            # A record for audit and calibration: the visible context does not change.
            # Applied before the library bumps the version: this event's is one more.
            run, version = aggregate.usage_run, aggregate.version
            first = run[0] if run is not None and run[1] == version else version
            aggregate.usage_run = [first, version + 1]
            if self.call is not None:  # a retried capture is known by its id
                recent = getattr(aggregate, "recent_calls", None) or []
                aggregate.recent_calls = [*recent[-(RECENT_CALLS - 1) :], self.call["call_id"]]

    class MessageBegun(Aggregate.Event):
        """A reply starts streaming: visible at once, marked incomplete (domain/streaming.py)."""

        class_version = 1
        message: JSON
        tokens: int
        estimated: bool
        after_id: str | None
        batch: int
        actor: str

        def apply(self, aggregate: Any) -> None:
            aggregate._place([self.message], [self.tokens], self.estimated, self.after_id)

    class MessageDeltas(Aggregate.Event):
        """What streamed into an incomplete message since the last such event (neutral
        deltas, applied in order); `tokens` is what the message costs afterwards."""

        class_version = 1
        id: str
        deltas: list[JSON]
        tokens: int
        estimated: bool
        batch: int
        actor: str

        def apply(self, aggregate: Any) -> None:
            grown = apply_deltas(aggregate.entries[self.id]["message"], self.deltas)
            aggregate._swap_entry(grown, self.tokens, self.estimated)

    class MessageFinished(Aggregate.Event):
        """A streamed reply is complete: as it streamed (`message` None) or as given."""

        class_version = 1
        id: str
        message: JSON | None
        tokens: int
        estimated: bool
        batch: int
        actor: str

        def apply(self, aggregate: Any) -> None:
            given = self.message
            done = finalized(aggregate.entries[self.id]["message"] if given is None else given)
            aggregate._swap_entry(done, self.tokens, self.estimated)

    class MessageAbandoned(Aggregate.Event):
        """A streamed reply stops for good: kept as it stands (marked), or hidden."""

        class_version = 1
        id: str
        reason: str | None
        keep: bool
        batch: int
        actor: str

        def apply(self, aggregate: Any) -> None:
            if self.keep:
                old = aggregate.entries[self.id]
                kept = marked(old["message"], ABANDONED, self.reason)
                aggregate._swap_entry(kept, old["tokens"], old["estimated"])
            else:
                aggregate._hide([self.id])

    class ContextForked(Aggregate.Event):
        """The context starts as a copy of another's visible context at a version."""

        class_version = 1
        source_id: str
        source_version: int
        entries: list[JSON]  # in order: {"message", "tokens", "estimated", "summary_of"}
        actor: str

        def apply(self, aggregate: Any) -> None:
            for e in self.entries:
                aggregate._add_entry(
                    e["message"], e["tokens"], e["estimated"], summary_of=e["summary_of"]
                )
                aggregate.order.append(e["message"]["id"])
            aggregate.forked_from = {"context_id": self.source_id, "version": self.source_version}

    class HistoryRemoved(Aggregate.Event):
        """Never stored: stands, in a fold of a context's events, for the versions a
        retention policy removed (2..its version), carrying the context's state at its
        version (the checkpoint's snapshot). Folding it restores that state."""

        class_version = 1
        state: JSON  # a Snapshot's state
        keep_latest: int
        actor: str
        batch: int

        def mutate(self, aggregate: Any) -> Any:
            snapshot = Context.Snapshot(
                originator_id=self.originator_id, originator_version=self.originator_version,
                timestamp=self.timestamp, topic=Context.Snapshot.topic_of_context(),
                state=self.state,
            )  # fmt: skip
            restored = snapshot.mutate(None)
            if aggregate is None:
                return restored
            aggregate.__dict__.clear()
            aggregate.__dict__.update(restored.__dict__)
            return aggregate

    # ---- creation -------------------------------------------------------------------

    @event(ContextCreated)
    def __init__(
        self, name: str | None, metadata: JSON, encoding: str, actor: str, tenant: str | None
    ) -> None:
        self.name = name
        self.tenant = tenant
        self.metadata = metadata
        self.encoding = encoding
        self.created_by = actor
        self.order: list[str] = []
        self.entries: dict[str, JSON] = {}
        self.tokens = 0
        self.estimated = 0
        self.savepoints: list[JSON] = []
        self.forked_from: JSON | None = None

    @classmethod
    def start(
        cls, *, name: str | None, metadata: JSON | None, actor: str,
        encoding: str = "cl100k_base", tenant: str | None = None, context_id: UUID | None = None,
    ) -> Context:  # fmt: skip
        """A new, empty context; raises InvalidOperationError for a bad name or metadata."""
        check_tenant(tenant)
        check_name(name)
        meta = parse_json_object(metadata or {}, "context metadata")
        if context_id is not None and not isinstance(context_id, UUID):
            raise InvalidOperationError(f"context_id must be a UUID, got {context_id!r:.80}")
        # The library's _create takes a chosen originator id; None: a new random UUID.
        return cls._create(
            cls.ContextCreated, id=context_id,
            name=name, metadata=meta, encoding=encoding, actor=actor, tenant=tenant,
        )  # fmt: skip

    def fork_from(self, source: Context, *, actor: str) -> None:
        """Start this new, empty context as a copy of `source`'s visible context."""
        if self.version != 1 or self.order:
            raise InvalidOperationError("only a new, empty context can be a fork")
        if source.encoding != self.encoding:
            raise InvalidOperationError(
                f"a fork counts tokens as its source does ({source.encoding}), not {self.encoding}"
            )
        self.trigger_event(
            self.ContextForked, source_id=str(source.id), source_version=source.version,
            entries=source.copied_entries(), actor=actor,
        )  # fmt: skip

    # ---- helpers -----------------------------------------------------------------------

    def _add_entry(
        self, message: JSON, tokens: int, estimated: bool, *, summary_of: list[str] | None
    ) -> None:
        # Handlers run before the library bumps the version: this event's is one more.
        self.entries[message["id"]] = {
            "message": message,
            "summary_of": summary_of,
            "version": self.version + 1,
            "tokens": tokens,
            "estimated": estimated,
        }
        self.tokens += tokens
        self.estimated += estimated

    def _place(
        self, messages: list[JSON], tokens: list[int], estimated: bool, after_id: str | None
    ) -> None:
        new_ids = [m["id"] for m in messages]
        for m, n in zip(messages, tokens, strict=True):
            self._add_entry(m, n, estimated, summary_of=None)
        if after_id is None:
            self.order.extend(new_ids)
        else:
            at = self.order.index(after_id) + 1
            self.order[at:at] = new_ids

    def _hide(self, ids: list[str]) -> None:
        gone = set(ids)
        self.order = [i for i in self.order if i not in gone]
        for i in ids:
            self._drop_entry(i)

    def _swap_entry(self, message: JSON, tokens: int, estimated: bool) -> None:
        """A message's new state under its id (entries are never changed in place)."""
        old = self._drop_entry(message["id"])
        self._add_entry(message, tokens, estimated, summary_of=old["summary_of"])
        # No event carries the message as it now stands (deltas do not): a snapshot keeps it.
        self.entries[message["id"]]["inline"] = True

    def _drop_entry(self, msg_id: str) -> JSON:
        entry = self.entries.pop(msg_id)
        self.tokens -= entry["tokens"]
        self.estimated -= entry["estimated"]
        return entry


__all__ = ["JSON", "Context", "MessageRef", "new_message_id"]
