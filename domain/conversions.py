"""Reading a context back in any of the four shapes (domain/shapes/).

A message read in its own shape is its payload exactly as it came. Across shapes the
conversion is field by field (docs/reference/messages.md lists it); what cannot cross — reasoning
items and thinking blocks (another provider cannot verify their encryption or signature),
hosted-tool items, a provider's own fields — is left out and reported in `omitted`, never
mangled. A reply that did not finish streaming is sent repaired (domain/stream_repair.py),
what was dropped reported the same way. Each shape converts to itself (its module in
domain/shapes/), reading the others' messages through their shapes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ctxstore.domain.conversion_losses import JSON, Conversion
from ctxstore.domain.plain import is_record
from ctxstore.domain.shapes import ANTHROPIC, CHAT, GEMINI, RESPONSES, message_shape, shape_named
from ctxstore.domain.stream_repair import repair

if TYPE_CHECKING:
    from ctxstore.domain.messages import Message


def convert(
    messages: Sequence[Message], shape: str, *, store: bool = True, exact: bool = False
) -> Conversion:
    """The messages in `shape`: openai-chat (a list of messages), openai-responses (a list
    of input items; with `store=False` the items' ids are dropped and reasoning items
    without encrypted_content left out, as a request that stores nothing needs),
    anthropic ({"system", "messages"}) or gemini ({"system_instruction", "contents"}). Chat messages read back in the form Chat
    Completions takes, Anthropic messages as the Messages API takes them (role and content:
    the rest is reported); with `exact`, key for key as they were given (a provider's extras
    such as `reasoning_content`, `annotations` or a response's `usage`, which APIs refuse)."""
    target = shape_named(shape)
    if target is None:
        raise ValueError(f"unknown shape {shape!r}")
    messages, repaired = repair([m for m in messages if not is_record(m)])  # records: never sent
    done = target.convert(messages, message_shape, store=store, exact=exact)
    done.omitted[:0] = repaired
    return done


class ShapedMessages:
    """Reads of a list of messages in each shape (mixed into visible contexts and prompts)."""

    messages: list[Message]

    def conversion(self, shape: str, *, store: bool = True, exact: bool = False) -> Conversion:
        """The messages in `shape`, with what could not be carried over (`omitted`)."""
        return convert(self.messages, shape, store=store, exact=exact)

    def to_openai(self, *, exact: bool = False) -> list[JSON]:
        """The messages as Chat Completions takes them (`exact`: chat messages key for key
        as they were given, see `convert`)."""
        payload: list[JSON] = convert(self.messages, CHAT, exact=exact).payload
        return payload

    def to_responses(self, *, store: bool = True) -> list[JSON]:
        """The messages as Responses API input items (`store=False`: see `convert`)."""
        payload: list[JSON] = convert(self.messages, RESPONSES, store=store).payload
        return payload

    def to_gemini(self) -> JSON:
        """{"system_instruction": ..., "contents": [...]} as Gemini's generate_content takes
        them (each stored Gemini Content as it came)."""
        payload: JSON = convert(self.messages, GEMINI).payload
        return payload

    def to_anthropic(self, *, exact: bool = False) -> JSON:
        """{"system": ..., "messages": [...]} as Anthropic's Messages API takes them
        (`exact`: each stored Anthropic message key for key as it came, a response's id,
        model, stop_reason and usage included, which the API refuses in a request)."""
        payload: JSON = convert(self.messages, ANTHROPIC, exact=exact).payload
        return payload
