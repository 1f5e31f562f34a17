"""The commands of the `Context` aggregate on its messages and batches: each checks
everything, then triggers one event. A mixin of the aggregate, which holds the events and
how they apply (their stored topics name `Context`); streamed replies' commands are in
context_streams.py."""

from __future__ import annotations

from collections.abc import Sequence

from ctxstore.domain.context_reads import (
    JSON,
    MessageRef,
    new_message_id,
)
from ctxstore.domain.context_triggers import ContextTriggers
from ctxstore.domain.errors import (
    InvalidOperationError,
    MalformedTranscriptError,
    UnknownBatchError,
)
from ctxstore.domain.limits import check_latency, check_usage, strict_int
from ctxstore.domain.message_input import parse_json_object, parse_message, stored_batch
from ctxstore.domain.messages import Message
from ctxstore.domain.plain import is_record
from ctxstore.domain.streaming import (
    STREAMING,
    incomplete_state,
)
from ctxstore.domain.summaries import covered_run, expanded_order, summary_payload
from ctxstore.domain.tokens import ESTIMATE, TextCounter, message_cost
from ctxstore.domain.transcript import check_placement, check_transcript, pairing_closure_violation


class ContextCommands(ContextTriggers):
    """insert, delete, replace, compress, expand, batch_start, batch_end, record_usage."""

    version: int

    def insert(
        self,
        messages: Message | JSON | Sequence[Message | JSON],
        *,
        after: MessageRef | None = None,
        actor: str,
        counter: TextCounter = ESTIMATE,
        format: str | None = None,
    ) -> list[str]:
        """Append messages, or place them after a visible message; returns their ids.
        `format` names their shape (openai-chat, openai-responses, anthropic); by default
        each message's is detected (domain/shapes/detection.py)."""
        payload = stored_batch(messages, format)  # each message's stored form
        after_id = None if after is None else self.resolve(after)
        taken: set[str] = set()
        for p in payload:
            msg_id = p["id"] or new_message_id()
            if self._id_in_use(msg_id) or msg_id in taken:
                raise InvalidOperationError(f"message id {msg_id!r} is already in use")
            taken.add(msg_id)
            p["id"] = msg_id
        if self.checks_transcript and not all(is_record(p) for p in payload):
            # (records sit anywhere: a batch of them alone is not checked, nor the context's
            # tail read, which may be every record it holds)
            check_placement(self.order, self._messages_by_id(), payload, after_id)
        costs = [message_cost(p, counter) for p in payload]
        tokens = [n for n, _ in costs]
        estimated = any(e for _, e in costs)
        self.trigger_event(
            self.MessagesInserted, messages=payload, tokens=tokens, estimated=estimated,
            after_id=after_id, batch=self.batch, actor=actor,
        )  # fmt: skip
        return [p["id"] for p in payload]

    def delete(self, refs: MessageRef | Sequence[MessageRef], *, actor: str) -> list[str]:
        """Hide visible messages (they stay in the log); returns their ids."""
        ids = self._resolve_distinct(refs, "delete")
        problem = self.checks_transcript and pairing_closure_violation(
            set(ids), self.order, self._messages_by_id()
        )
        if problem:
            raise MalformedTranscriptError(
                f"delete would break a tool call from its result: {problem}"
            )
        ordered = [i for i in self.order if i in set(ids)]
        self.trigger_event(self.MessagesDeleted, ids=ordered, batch=self.batch, actor=actor)
        return ordered

    def replace(
        self,
        ref: MessageRef,
        message: Message | JSON | str,
        *,
        actor: str,
        counter: TextCounter = ESTIMATE,
    ) -> str:
        """Give a visible message new content under the same id; returns the id.

        A plain string replaces only the content and keeps every other field.
        """
        msg_id = self.resolve(ref)
        if isinstance(message, str):
            if self.entries[msg_id]["message"].get("native") is not None:
                raise InvalidOperationError(
                    f"message {msg_id!r} is a native payload: replace it with a payload, "
                    "not a string"
                )
            message = {**self.entries[msg_id]["message"], "content": message}
        parsed = parse_message(message)
        if parsed.id is not None and parsed.id != msg_id:
            raise InvalidOperationError(
                f"replace keeps the id {msg_id!r}; the new message says {parsed.id!r}"
            )
        payload = parsed.model_copy(update={"id": msg_id}).stored()
        old = self._messages_by_id()
        if self.checks_transcript:
            check_transcript((i, payload if i == msg_id else old[i]) for i in self.order)
        tokens, estimated = message_cost(payload, counter)
        self.trigger_event(
            self.MessageReplaced, id=msg_id, message=payload, tokens=tokens,
            estimated=estimated, batch=self.batch, actor=actor,
        )  # fmt: skip
        return msg_id

    def compress(
        self,
        refs: MessageRef | Sequence[MessageRef],
        summary: Message | JSON,
        *,
        stats: JSON | None = None,
        actor: str,
        counter: TextCounter = ESTIMATE,
    ) -> str:
        """Put one summary message in place of a contiguous run; returns the summary's id."""
        covered = covered_run(self, self._resolve_distinct(refs, "compress"))
        streaming = [i for i in covered if incomplete_state(self.stored_message(i)) == STREAMING]
        if streaming:
            raise InvalidOperationError(f"compress would cover {streaming[0]!r}, still streaming")
        parsed = summary_payload(summary)
        summary_id = parsed.id or new_message_id()
        if self._id_in_use(summary_id):
            raise InvalidOperationError(f"message id {summary_id!r} is already in use")
        payload = parsed.model_copy(update={"id": summary_id}).stored()
        clean_stats = parse_json_object(stats or {}, "compress stats")
        tokens, estimated = message_cost(payload, counter)
        before = sum(int(self.entries[i]["tokens"]) for i in covered)
        self.trigger_event(
            self.MessagesCompressed, ids=covered, summary=payload, tokens=tokens,
            estimated=estimated, tokens_before=before, stats=clean_stats, batch=self.batch,
            actor=actor,
        )  # fmt: skip
        return summary_id

    def expand(self, ref: MessageRef, covered: Sequence[JSON], *, actor: str) -> list[str]:
        """Put the messages a summary covers back in its place, keeping everything around
        it; `covered` are their entries as the summary found them (the store reads them from
        the history). Returns their ids."""
        expanded_order(self, ref, covered)
        self.trigger_event(
            self.SummaryExpanded, id=self.resolve(ref), entries=list(covered),
            batch=self.batch, actor=actor,
        )  # fmt: skip
        return [e["message"]["id"] for e in covered]

    def batch_start(self, *, actor: str) -> int:
        """Open batch n+1 on top of the current batch n; returns the new number."""
        self.trigger_event(self.BatchStarted, batch=self.batch + 1, actor=actor)
        return self.batch

    def batch_end(self, *, to: int | None = None, keep: bool = False, actor: str) -> int:
        """Close every batch above `to` (default: the top one); returns the current batch.

        keep=False rolls back: the visible context becomes what it was when batch to+1
        opened. keep=True closes the batches and keeps their changes.
        """
        if self.batch == 0:
            raise UnknownBatchError("no batch is open; batch 0 is the base and cannot end")
        target = self.batch - 1 if to is None else to
        if not strict_int(target):
            raise UnknownBatchError(f"batch number must be an integer, got {target!r}")
        if not 0 <= target < self.batch:
            raise UnknownBatchError(
                f"cannot end to batch {target}: open batches are 0..{self.batch}"
                f" and the target must be below the current batch {self.batch}"
            )
        reverts_from = None if keep else int(self.savepoints[target]["version"])
        self.trigger_event(
            self.BatchEnded, batch=self.batch, to=target, keep=keep, reverts_from=reverts_from,
            actor=actor,
        )  # fmt: skip
        return self.batch

    def record_call(
        self, call: JSON, *, for_version: int, model: str, prompt_tokens: int,
        completion_tokens: int, counted_tokens: int, estimated: bool, sent: list[JSON] | None,
        actor: str, latency: float | None = None,
    ) -> bool:  # fmt: skip
        """Record a captured call (domain/captured.py) made with the context at
        `for_version`; False when this context already holds the call (a retry)."""
        if call["call_id"] in (getattr(self, "recent_calls", None) or ()):
            return False
        check_usage(
            model, {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                    "counted_tokens": counted_tokens}, for_version, self.version, sent,
        )  # fmt: skip
        check_latency(latency)
        self.trigger_event(
            self.UsageRecorded, for_version=for_version, model=model,
            prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
            counted_tokens=counted_tokens, estimated=bool(estimated), sent=sent,
            batch=self.batch, actor=actor,
            latency_ms=None if latency is None else round(float(latency) * 1000, 3), call=call,
        )  # fmt: skip
        return True

    def record_usage(
        self, *, for_version: int, model: str, prompt_tokens: int, completion_tokens: int,
        counted_tokens: int, estimated: bool, sent: list[JSON] | None = None, actor: str,
        latency: float | None = None,
    ) -> None:  # fmt: skip
        """Record a provider's usage for a call made with the context at `for_version`
        (`latency`: the call's seconds, where the caller measured them)."""
        check_usage(
            model, {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                    "counted_tokens": counted_tokens}, for_version, self.version, sent,
        )  # fmt: skip
        check_latency(latency)
        self.trigger_event(
            self.UsageRecorded, for_version=for_version, model=model,
            prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
            counted_tokens=counted_tokens, estimated=bool(estimated), sent=sent,
            batch=self.batch, actor=actor,
            latency_ms=None if latency is None else round(float(latency) * 1000, 3), call=None,
        )  # fmt: skip
