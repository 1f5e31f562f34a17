"""How many tokens a message costs, the way the chat API bills it.

    prompt   = sum(message) + REPLY_PRIMING            # <|start|>assistant<|message|>
    message  = PER_MESSAGE                             # <|start|>{role}<|message|> ... <|end|>
             + tokens(role)
             + tokens(text)                            # string content, or every text part
             + tokens(refusal)
             + (tokens(name) + PER_NAME if name)
             + sum(tokens(fn.name) + tokens(fn.arguments) + PER_TOOL_CALL for each tool call)

PER_MESSAGE, PER_NAME and REPLY_PRIMING are OpenAI's published values for its chat models.
PER_TOOL_CALL is our estimate of a call's framing; provider usage (`record_usage`) shows how
far it is from a given provider. Images are priced by OpenAI's tile formula
(domain/images.py); audio and files are not priced and make the count an estimate. Text
is encoded as ordinary text: a message containing
"<|endoftext|>" is counted as the characters it is, as the API does. Which texts and parts a
message holds is its shape's to say (domain/shapes/: `texts`, `parts_cost`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Protocol

from ctxstore.domain.plain import is_record
from ctxstore.domain.shapes import stored_shape
from ctxstore.domain.shapes.base import JSON, Shape

PER_MESSAGE = 3
PER_NAME = 1
PER_TOOL_CALL = 3
REPLY_PRIMING = 3

# The estimate, where no tokenizer file is available: the text is split as the encodings'
# pre-tokenizers split it (letter runs, digit runs, symbol runs, spaces) and each piece
# priced per character class, fitted against exact o200k_base and cl100k_base on EN/ZH/JA/
# KO text to err on the safe side (docs/reference/tokens.md has the figures). Kana and hangul are
# priced as what they are, not as Latin letters.
_PIECE = re.compile(
    r"(?P<han>[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f])"
    r"|(?P<kana>[\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f]+)"
    r"|(?P<hangul>[\u1100-\u11ff\u3130-\u318f\uac00-\ud7af]+)"
    r"|(?P<latin>[A-Za-z]+)|(?P<letters>[^\W\d_]+)|(?P<digits>\d+)|(?P<space>\s+)"
    r"|(?P<symbols>[^\w\s]+|_+)"
)


@dataclass(frozen=True)
class ScriptCosts:
    """Tokens per character of each script (CJK), and how Latin runs are priced."""

    han: float
    kana: float
    hangul: float
    latin_chars: float = 4.0  # a Latin run longer than SHORT_WORD costs ceil(len / this)
    other_chars: float = 2.0  # letters of other scripts (Cyrillic, accented, ...)


SHORT_WORD = 5  # a Latin run this long or shorter is one token
O200K_COSTS = ScriptCosts(han=1.25, kana=1.1, hangul=1.2)  # o200k_base and later
LEGACY_COSTS = ScriptCosts(han=2.0, kana=1.35, hangul=1.7)  # cl100k_base and earlier


class TextCounter(Protocol):
    """Counts the tokens of a text; `exact` is False for an estimate."""

    @property
    def name(self) -> str: ...

    @property
    def exact(self) -> bool: ...

    def count(self, text: str) -> int: ...


def estimate_text_tokens(text: str, costs: ScriptCosts = O200K_COSTS) -> int:
    """A script-aware estimate that errs on the safe side (see _PIECE)."""
    total = 0.0
    for m in _PIECE.finditer(text):
        kind, piece = m.lastgroup, m.group()
        if kind == "han":
            total += costs.han
        elif kind == "kana":
            total += len(piece) * costs.kana
        elif kind == "hangul":
            total += len(piece) * costs.hangul
        elif kind == "latin":
            total += 1 if len(piece) <= SHORT_WORD else math.ceil(len(piece) / costs.latin_chars)
        elif kind == "letters":
            total += math.ceil(len(piece) / costs.other_chars)
        elif kind == "digits":
            total += math.ceil(len(piece) / 3)  # the encodings split digits in threes
        elif kind == "space":
            total += piece != " "  # one space joins the next word; other runs are a token
        else:
            total += max(1, math.ceil(len(piece) * 0.6))
    return math.ceil(total)


@dataclass(frozen=True)
class EstimateCounter:
    """The fallback where no tokenizer file is available; its figures are labelled estimated."""

    name: str = "estimate"
    exact: bool = False
    costs: ScriptCosts = O200K_COSTS

    def count(self, text: str) -> int:
        return estimate_text_tokens(text, self.costs)


ESTIMATE = EstimateCounter()
LEGACY_ESTIMATE = EstimateCounter(costs=LEGACY_COSTS)  # for cl100k_base and earlier


def message_texts(message: dict[str, Any]) -> list[str]:
    """The texts of a message (as JSON) that the formula encodes, role first (a native
    payload: the texts a model reads in it, by its shape: domain/shapes/)."""
    shape, payload = stored_shape(message)
    return [message["role"], *shape.texts(payload)]


def message_cost(message: dict[str, Any], counter: TextCounter) -> tuple[int, bool]:
    """Tokens one message (as JSON) costs in a prompt, and whether the figure is an
    estimate (the counter's, a part priced without its size, or a shape whose provider
    publishes no tokenizer)."""
    if is_record(message):
        return 0, False  # never sent to a model
    shape, payload = stored_shape(message)
    extra, estimated = shape.parts_cost(payload)
    # Anthropic and Google publish no tokenizer: their texts are counted as estimates.
    estimated = estimated or not shape.tokenizer_published
    tokens = _text_tokens(message, shape, payload, counter)
    return tokens + extra, estimated or not counter.exact


def message_tokens(message: dict[str, Any], counter: TextCounter) -> int:
    """Tokens one message's text costs in a prompt, by the formula above (message_cost
    adds its non-text parts)."""
    return _text_tokens(message, *stored_shape(message), counter)


def _text_tokens(message: dict[str, Any], shape: Shape, payload: JSON, counter: TextCounter) -> int:
    framing = PER_MESSAGE
    if message.get("native") is None:
        if message.get("name"):
            framing += PER_NAME
        framing += PER_TOOL_CALL * (
            len(message.get("tool_calls") or []) + bool(message.get("function_call"))
        )
    role, count = message["role"], counter.count
    texts = shape.texts(payload)
    return framing + (count(role) if role else 0) + sum(count(t) for t in texts if t)
