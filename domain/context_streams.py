"""The commands of a streamed reply (domain/streaming.py): begin, append, finish, abandon.

A mixin of the `Context` aggregate, which holds their events and how they apply (their stored
topics name `Context`); each command checks everything, then triggers one event.
"""

from __future__ import annotations

from ctxstore.domain.context_reads import JSON, MessageRef, new_message_id
from ctxstore.domain.context_triggers import ContextTriggers
from ctxstore.domain.errors import InvalidOperationError, MalformedTranscriptError
from ctxstore.domain.message_input import parse_batch, parse_message
from ctxstore.domain.messages import Message
from ctxstore.domain.streaming import STREAMING, apply_deltas, finalized, incomplete_state, marked
from ctxstore.domain.tokens import ESTIMATE, TextCounter, message_cost
from ctxstore.domain.transcript import check_placement, check_transcript, pairing_closure_violation


class StreamCommands(ContextTriggers):
    """begin / append / finish / abandon of an incomplete assistant message."""

    def begin(
        self, message: Message | JSON, *, after: MessageRef | None = None, actor: str,
        counter: TextCounter = ESTIMATE, format: str | None = None,
    ) -> str:  # fmt: skip
        """Start an assistant reply that streams in; returns its id. It is visible at once,
        marked incomplete, until finish() or abandon()."""
        (parsed,) = parse_batch([message], format)
        if parsed.role != "assistant":
            raise InvalidOperationError(f"a streamed reply is an assistant's, not {parsed.role}'s")
        msg_id = parsed.id or new_message_id()
        if self._id_in_use(msg_id):
            raise InvalidOperationError(f"message id {msg_id!r} is already in use")
        payload = marked({**parsed.stored(), "id": msg_id}, STREAMING)
        after_id = None if after is None else self.resolve(after)
        if self.checks_transcript:
            check_placement(self.order, self._messages_by_id(), [payload], after_id)
        tokens, estimated = message_cost(payload, counter)
        self.trigger_event(
            self.MessageBegun, message=payload, tokens=tokens, estimated=estimated,
            after_id=after_id, batch=self.batch, actor=actor,
        )  # fmt: skip
        return msg_id

    def append(
        self, ref: MessageRef, deltas: list[JSON], *, actor: str, counter: TextCounter = ESTIMATE
    ) -> str:
        """Add neutral deltas (streaming.neutral_deltas) to a streaming reply; returns its id."""
        msg_id = self._streaming(ref, "append to")
        if not deltas:
            return msg_id
        grown = apply_deltas(self.stored_message(msg_id), deltas)
        parse_message(grown)  # what it became is still a valid message of its shape
        tokens, estimated = message_cost(grown, counter)
        self.trigger_event(
            self.MessageDeltas, id=msg_id, deltas=list(deltas), tokens=tokens,
            estimated=estimated, batch=self.batch, actor=actor,
        )  # fmt: skip
        return msg_id

    def finish(
        self, ref: MessageRef, message: Message | JSON | None = None, *, actor: str,
        counter: TextCounter = ESTIMATE,
    ) -> str:  # fmt: skip
        """Complete a streaming reply, as it streamed or as `message` (the SDK's final
        object: it takes the reply's place, under the same id); returns its id."""
        msg_id = self._streaming(ref, "finish")
        final = None
        if message is not None:
            parsed = parse_message(message)
            if parsed.id is not None and parsed.id != msg_id:
                raise InvalidOperationError(f"finish keeps the id {msg_id!r}, not {parsed.id!r}")
            final = {**parsed.stored(), "id": msg_id}
        done = finalized(self.stored_message(msg_id) if final is None else final)
        parsed = parse_message(done)
        if parsed.role != "assistant":
            raise InvalidOperationError(f"a streamed reply is an assistant's, not {parsed.role}'s")
        if self.checks_transcript:
            old = self._messages_by_id()
            check_transcript((i, done if i == msg_id else old[i]) for i in self.order)
        tokens, estimated = message_cost(done, counter)
        self.trigger_event(
            self.MessageFinished, id=msg_id, message=final, tokens=tokens, estimated=estimated,
            batch=self.batch, actor=actor,
        )  # fmt: skip
        return msg_id

    def abandon(
        self, ref: MessageRef, *, reason: str | None = None, keep: bool = True, actor: str
    ) -> str:
        """Stop a streaming reply for good: kept as it stands, marked abandoned (prompts send
        it repaired), or hidden (`keep=False`); returns its id."""
        msg_id = self._streaming(ref, "abandon")
        if reason is not None and (not isinstance(reason, str) or len(reason) > 1000):
            raise InvalidOperationError("an abandon's reason is a string of at most 1000 chars")
        if not keep and self.checks_transcript:
            problem = pairing_closure_violation({msg_id}, self.order, self._messages_by_id())
            if problem:
                raise MalformedTranscriptError(f"hiding it would break a tool call: {problem}")
        self.trigger_event(
            self.MessageAbandoned, id=msg_id, reason=reason, keep=bool(keep), batch=self.batch,
            actor=actor,
        )  # fmt: skip
        return msg_id

    def _streaming(self, ref: MessageRef, what: str) -> str:
        msg_id = self.resolve(ref)
        state = incomplete_state(self.stored_message(msg_id))
        if state != STREAMING:
            said = "finished" if state is None else state
            raise InvalidOperationError(f"cannot {what} message {msg_id!r}: it is {said}")
        return msg_id
