"""The interface of a message shape: everything the store does differently per shape.

A shape's messages are detected in what callers insert, validated and read for what the
transcript rules pair (the calls a message makes, the calls it answers), counted, converted
to and from the other shapes (what cannot cross reported), streamed (a provider's stream
events read, deltas applied, the reply finished) and, when a reply did not finish, repaired
for a prompt. Each shape implements all of it in one module (chat.py, responses.py,
anthropic.py, gemini.py): the abstract methods, and the others where it differs from what
most shapes do; registry.py names them. Callers ask the registry for a message's
shape and call it: they never compare a shape's name.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from ctxstore.domain.conversion_losses import Conversion

if TYPE_CHECKING:
    from ctxstore.domain.messages import Message

JSON = dict[str, Any]


@dataclass(frozen=True)
class Native:
    """What the store reads from a message of a shape (a native payload, or a chat message
    as stored): what the transcript rules pair."""

    format: str
    role: str  # user, assistant, system, developer; "tool" for the result of a call
    calls: tuple[str, ...]  # ids of the calls it makes, answered by later messages
    answers: tuple[str, ...]  # ids of the calls it answers
    reasoning: bool  # a reasoning item, or an assistant turn carrying thinking blocks


_PLAIN: dict[tuple[str, str], Native] = {}


def plain_native(format: str, role: str) -> Native:
    """Native(format, role, (), (), False): a message that makes and answers no call (most
    of them), one shared instance per (format, role) (a frozen dataclass is slow to make,
    and the transcript checks read every message they pair)."""
    found = _PLAIN.get((format, role)) if type(role) is str else None
    if found is None:
        found = Native(format, role, (), (), False)
        if type(role) is str and len(_PLAIN) < 64:  # (roles are few: an odd one is not kept)
            _PLAIN[(format, role)] = found
    return found


class Shape(ABC):
    """One shape of messages (see the module)."""

    name: ClassVar[str]
    # Kept as {"format", "native": <the payload as it came>}; chat messages as their fields.
    native: ClassVar[bool]
    # The next user turn answers every call of a turn at once (Anthropic, Gemini).
    answers_at_once: ClassVar[bool]
    # A turn's calls and reasoning are items of their own (Responses): a further call or
    # reasoning item joins the block of calls still open.
    turn_in_items: ClassVar[bool]
    # Its provider publishes its tokenizer: without one, counts are estimates.
    tokenizer_published: ClassVar[bool]

    # ---- detecting -----------------------------------------------------------------

    @abstractmethod
    def by_type(self, data: JSON) -> bool:
        """Whether a dict's `type` (or its lack of one) makes it a message of this shape."""

    def by_content(self, data: JSON) -> bool:
        """Whether a dict's content holds what only this shape's messages hold."""
        return False

    @abstractmethod
    def takes_plain(self, message: JSON) -> bool:
        """Whether a message that reads as chat is also a valid message of this shape as it is
        (a plain {"role", "content"} takes the shape of the batch it came in)."""

    # ---- validating and pairing ----------------------------------------------------

    @abstractmethod
    def read(self, payload: JSON) -> Native:
        """What the store reads from a payload (a chat message: as stored); raises
        InvalidMessageError naming what is missing or unknown."""

    # ---- counting --------------------------------------------------------------------

    @abstractmethod
    def texts(self, payload: JSON) -> list[str]:
        """The texts a model reads in a payload (for counting and previews)."""

    @abstractmethod
    def parts_cost(self, payload: JSON) -> tuple[int, bool]:
        """What a payload's non-text parts cost, and whether that is an estimate."""

    # ---- converting ------------------------------------------------------------------

    @abstractmethod
    def to_chat(self, m: Message, done: Conversion) -> list[JSON]:
        """A message of this shape as Chat Completions messages (what cannot cross is
        reported in `done`)."""

    def as_chat(self, m: Message, done: Conversion) -> list[JSON]:
        """A message of this shape as the other shapes' converters read it: chat messages
        in the form every shape has (a call always with an id)."""
        return self.to_chat(m, done)

    def direct_responses(self, m: Message, done: Conversion) -> list[JSON] | None:
        """Responses items read straight from a message of this shape, where that carries
        more than going through chat; None to go through chat."""
        return None

    @abstractmethod
    def convert(
        self, messages: Sequence[Message], source: Source, *, store: bool, exact: bool
    ) -> Conversion:
        """The messages (of any shape: `source` tells each one's) in this shape; `store` and
        `exact` as conversions.convert says."""

    # ---- streaming -------------------------------------------------------------------

    @abstractmethod
    def opening(self) -> JSON:
        """An empty assistant reply of this shape: how a streamed one starts by default."""

    @abstractmethod
    def stream_deltas(self, event: JSON, n: int) -> list[JSON] | None:
        """The neutral deltas of one of its provider's stream events (domain/streaming.py);
        None when `event` is none of them (`n`: its place, for errors)."""

    @abstractmethod
    def apply_delta(self, payload: JSON, delta: JSON, partial: dict[str, str]) -> None:
        """Apply one neutral delta to a payload being streamed, in place; `partial` keeps
        what streams as text until the reply finishes (a call's JSON input, by place).
        Raises InvalidOperationError for a delta the shape cannot hold."""

    def finished(self, payload: JSON, partial: dict[str, str]) -> JSON:
        """A streamed payload once complete: what `partial` kept read into it. Raises
        InvalidMessageError when that is not complete JSON."""
        return payload  # (a shape whose deltas keep nothing partial)

    # ---- repairing a reply that did not finish -----------------------------------------

    def makes_calls(self, m: Message) -> bool:
        """Whether a message makes calls that a later message must answer."""
        return bool(m.call_ids)

    def answered_by(self, m: Message) -> set[str]:
        """The call ids a message answers (its own hosted calls' included)."""
        return set(m.shape.answers if m.shape else ())

    @abstractmethod
    def repaired(
        self, m: Message, answered: set[str], last: bool, notes: list[JSON]
    ) -> Message | None:
        """An incomplete message as a prompt sends it (domain/stream_repair.py), None when
        nothing is left to send; what is dropped goes to `notes`. `answered`: the call ids
        later messages answer; `last`: whether it ends the prompt."""

    def drops_before(self, before: Message) -> bool:
        """Whether `before`, the message kept just before a dropped message of this shape,
        goes with it (a Responses reasoning item goes with the item it led to)."""
        return False


# Which shape a message is (registry.message_shape): passed in where a shape converts
# messages of the others, so that no shape's module imports the registry.
Source = Callable[["Message"], Shape]
