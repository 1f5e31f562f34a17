"""The triggers of the `Context` aggregate's events: each command (context_commands.py,
context_streams.py) checks everything, then triggers one event through these; the events,
their stored topics naming `Context`, apply themselves (domain/context.py).

Events are made with the library's `trigger_event` and applied by their class's `apply`,
not through its `@event` decorator: on the hottest paths (every append, every replay of
one) the decorator's matching of arguments to a handler's signature cost more than
applying the event.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ctxstore.domain.context_reads import JSON, ContextReads


class ContextTriggers(ContextReads):
    """One method an event: its fields, typed, and the event triggered."""

    if TYPE_CHECKING:  # the aggregate's (domain/context.py, the library's Aggregate)
        MessagesInserted: type[Any]
        MessagesDeleted: type[Any]
        MessageReplaced: type[Any]
        MessagesCompressed: type[Any]
        SummaryExpanded: type[Any]
        BatchStarted: type[Any]
        BatchEnded: type[Any]
        UsageRecorded: type[Any]
        MessageBegun: type[Any]
        MessageDeltas: type[Any]
        MessageFinished: type[Any]
        MessageAbandoned: type[Any]
        ContextForked: type[Any]

        def trigger_event(self, event_class: type[Any], **kwargs: Any) -> None: ...

    def _messages_inserted(
        self, messages: list[JSON], tokens: list[int], estimated: bool, after_id: str | None,
        batch: int, actor: str,
    ) -> None:  # fmt: skip
        self.trigger_event(
            self.MessagesInserted, messages=messages, tokens=tokens, estimated=estimated,
            after_id=after_id, batch=batch, actor=actor,
        )  # fmt: skip

    def _messages_deleted(self, ids: list[str], batch: int, actor: str) -> None:
        self.trigger_event(self.MessagesDeleted, ids=ids, batch=batch, actor=actor)

    def _message_replaced(
        self, id: str, message: JSON, tokens: int, estimated: bool, batch: int, actor: str
    ) -> None:
        self.trigger_event(
            self.MessageReplaced, id=id, message=message, tokens=tokens, estimated=estimated,
            batch=batch, actor=actor,
        )  # fmt: skip

    def _messages_compressed(
        self, ids: list[str], summary: JSON, tokens: int, estimated: bool, tokens_before: int,
        stats: JSON, batch: int, actor: str,
    ) -> None:  # fmt: skip
        self.trigger_event(
            self.MessagesCompressed, ids=ids, summary=summary, tokens=tokens,
            estimated=estimated, tokens_before=tokens_before, stats=stats, batch=batch,
            actor=actor,
        )  # fmt: skip

    def _summary_expanded(self, id: str, entries: list[JSON], batch: int, actor: str) -> None:
        self.trigger_event(self.SummaryExpanded, id=id, entries=entries, batch=batch, actor=actor)

    def _batch_started(self, batch: int, actor: str) -> None:
        self.trigger_event(self.BatchStarted, batch=batch, actor=actor)

    def _batch_ended(
        self, batch: int, to: int, keep: bool, reverts_from: int | None, actor: str
    ) -> None:
        self.trigger_event(
            self.BatchEnded, batch=batch, to=to, keep=keep, reverts_from=reverts_from,
            actor=actor,
        )  # fmt: skip

    def _usage_recorded(
        self, for_version: int, model: str, prompt_tokens: int, completion_tokens: int,
        counted_tokens: int, estimated: bool, sent: list[JSON] | None, batch: int, actor: str,
        latency_ms: float | None,
    ) -> None:  # fmt: skip
        self.trigger_event(
            self.UsageRecorded, for_version=for_version, model=model,
            prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
            counted_tokens=counted_tokens, estimated=estimated, sent=sent, batch=batch,
            actor=actor, latency_ms=latency_ms,
        )  # fmt: skip

    def _message_begun(
        self, message: JSON, tokens: int, estimated: bool, after_id: str | None, batch: int,
        actor: str,
    ) -> None:  # fmt: skip
        self.trigger_event(
            self.MessageBegun, message=message, tokens=tokens, estimated=estimated,
            after_id=after_id, batch=batch, actor=actor,
        )  # fmt: skip

    def _message_deltas(
        self, id: str, deltas: list[JSON], tokens: int, estimated: bool, batch: int, actor: str
    ) -> None:
        self.trigger_event(
            self.MessageDeltas, id=id, deltas=deltas, tokens=tokens, estimated=estimated,
            batch=batch, actor=actor,
        )  # fmt: skip

    def _message_finished(
        self, id: str, message: JSON | None, tokens: int, estimated: bool, batch: int,
        actor: str,
    ) -> None:  # fmt: skip
        self.trigger_event(
            self.MessageFinished, id=id, message=message, tokens=tokens, estimated=estimated,
            batch=batch, actor=actor,
        )  # fmt: skip

    def _message_abandoned(
        self, id: str, reason: str | None, keep: bool, batch: int, actor: str
    ) -> None:
        self.trigger_event(
            self.MessageAbandoned, id=id, reason=reason, keep=keep, batch=batch, actor=actor
        )

    def _context_forked(
        self, source_id: str, source_version: int, entries: list[JSON], actor: str
    ) -> None:
        self.trigger_event(
            self.ContextForked, source_id=source_id, source_version=source_version,
            entries=entries, actor=actor,
        )  # fmt: skip
