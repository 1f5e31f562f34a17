"""Reads of a context's state: its messages by id, positions resolved to ids, the batch;
and how its open batches' saved entries are laid out in a snapshot.

A mixin of the `Context` aggregate, kept apart so that the aggregate's module holds its
events and commands; nothing outside the domain indexes the aggregate's raw state.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from secrets import token_hex
from typing import Any, cast

from ctxstore.domain.errors import InvalidOperationError, UnknownMessageError
from ctxstore.domain.messages import Message

JSON = dict[str, Any]
MessageRef = str | int  # a message id, or a position in the visible list (negative from the end)


def new_message_id() -> str:
    """A fresh message id; ids are stable for the life of the message."""
    return "msg_" + token_hex(12)


class ContextReads:
    """Typed reads over `order` (visible ids), `entries` (id -> entry), `savepoints`."""

    order: list[str]
    entries: dict[str, JSON]
    savepoints: list[JSON]
    metadata: JSON
    version: int
    # [first, last]: the trailing run of versions that only recorded usage, after the
    # context's content last changed at `first` (None: the newest event changed content).
    usage_run: list[int] | None = None
    recent_calls: list[str] | None = None  # the newest captured calls' ids (a retry's check)

    def at_content_version(self, expected: int) -> bool:
        """Whether the context's content is as it was at version `expected`: its version,
        or a version whose content only usage records followed — a prompt built at a
        version stays current when its own call's usage is recorded."""
        if expected == self.version:
            return True
        run = self.usage_run
        return run is not None and run[1] == self.version and run[0] <= expected <= run[1]

    @property
    def checks_transcript(self) -> bool:
        """Whether commands hold the transcript rules: yes, unless the context was created
        with metadata {"ctxstore": {"transcript": "as-given"}} — an SDK session whose SDK
        owns its history's validity (the store then records exactly what it is given)."""
        own = self.metadata.get("ctxstore")
        return not (isinstance(own, dict) and own.get("transcript") == "as-given")

    @property
    def batch(self) -> int:
        """The current batch number; batch 0 is the base, each open batch adds one."""
        return len(self.savepoints)

    # Typed reads of one message, so that nothing outside the aggregate indexes its state.
    def stored_message(self, msg_id: str) -> JSON:
        """A message as stored (its JSON, not a copy); raises KeyError for an unknown id."""
        return cast(JSON, self.entries[msg_id]["message"])

    def has_message(self, msg_id: str) -> bool:
        """Whether a message with this id is in the context's state (visible or covered)."""
        return msg_id in self.entries

    def role_of(self, msg_id: str) -> str:
        return cast(str, self.entries[msg_id]["message"]["role"])

    def is_summary(self, msg_id: str) -> bool:
        """Whether the message is a summary written in place of others."""
        return self.entries[msg_id]["summary_of"] is not None

    def covered_by(self, msg_id: str) -> list[str]:
        """The ids a summary covers ([] for any other message)."""
        return list(self.entries[msg_id]["summary_of"] or [])

    def tokens_of(self, msg_id: str) -> int:
        return int(self.entries[msg_id]["tokens"])

    def entry_version(self, msg_id: str) -> int:
        """The version of the event that wrote the message as it is now."""
        return int(self.entries[msg_id]["version"])

    def visible_messages(self) -> list[Message]:
        """The visible context, in order, as validated messages."""
        return [Message.model_validate(self.entries[i]["message"]) for i in self.order]

    def resolve(self, ref: MessageRef) -> str:
        """A visible message's id from an id or a position; raises UnknownMessageError."""
        if isinstance(ref, bool):
            raise UnknownMessageError(f"not a message id or position: {ref!r}")
        if isinstance(ref, int):
            n = len(self.order)
            if not -n <= ref < n:
                raise UnknownMessageError(
                    f"position {ref} is outside the visible context of {n} message(s)"
                )
            return self.order[ref]
        if not isinstance(ref, str) or ref not in self.entries:
            raise UnknownMessageError(f"no visible message with id {ref!r}")
        return ref

    def _resolve_distinct(self, refs: MessageRef | Sequence[MessageRef], what: str) -> list[str]:
        if isinstance(refs, str | int):
            refs = [refs]  # one message named on its own
        if not isinstance(refs, Sequence) or not refs:
            raise InvalidOperationError(f"{what} needs a non-empty list of message ids")
        ids = [self.resolve(r) for r in refs]
        if len(set(ids)) != len(ids):
            dupes = sorted({i for i in ids if ids.count(i) > 1})
            raise InvalidOperationError(f"{what} names message(s) {dupes} more than once")
        return ids

    def messages_by_id(self) -> Mapping[str, JSON]:
        """Every message in the state by id, as stored (a view, nothing copied)."""
        return self._messages_by_id()

    def copied_entries(self) -> list[JSON]:
        """The visible messages with their counts and summary links, as a fork copies them."""
        keys = ("message", "tokens", "estimated", "summary_of")
        return [{k: self.entries[i][k] for k in keys} for i in self.order]

    def share_head_entries(self) -> None:
        """Savepoints read back from a snapshot (None where the head held the entry
        unchanged) share the head's entries again."""
        head = self.entries
        for saved in self.savepoints:
            saved["entries"] = {i: head[i] if e is None else e for i, e in saved["entries"].items()}

    def _messages_by_id(self) -> Mapping[str, JSON]:
        return _MessageView(self.entries)

    def _id_in_use(self, msg_id: str) -> bool:
        """Visible, or could come back by a rollback: a new message may not take this id."""
        return msg_id in self.entries or any(msg_id in s["entries"] for s in self.savepoints)


class _MessageView(Mapping[str, JSON]):
    """Read-only id -> message mapping over entries, without copying them."""

    def __init__(self, entries: dict[str, JSON]) -> None:
        self._entries = entries

    def __getitem__(self, key: str) -> JSON:
        return self._entries[key]["message"]  # type: ignore[no-any-return]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)


def savepoints_as_stored(state: JSON) -> list[JSON]:
    """A snapshot state's open batches, each saved entry the head holds unchanged as None."""
    head = state["entries"]
    return [
        {**saved, "entries": {i: unless_held(head, i, e) for i, e in saved["entries"].items()}}
        for saved in state["savepoints"]
    ]


def unless_held(head: dict[str, JSON], msg_id: str, entry: JSON) -> JSON | None:
    """A batch's saved entry as a snapshot stores it: None when the head holds it unchanged."""
    held = head.get(msg_id)
    return None if held is entry or held == entry else entry
