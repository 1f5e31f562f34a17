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
far it is from a given provider. Non-text parts (images, audio, files) are billed by other
rules and count 0 here. Text is encoded as ordinary text: a message containing
"<|endoftext|>" is counted as the characters it is, as the API does.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Protocol

from ctxstore.domain.messages import stored_call_parts

PER_MESSAGE = 3
PER_NAME = 1
PER_TOOL_CALL = 3
REPLY_PRIMING = 3

# Chinese characters and CJK/full-width punctuation
_CJK = re.compile(r"[\u4e00-\u9fa5\u3000-\u303f\uff00-\uffef]")
CJK_CHARS_PER_TOKEN = 1.5
OTHER_CHARS_PER_TOKEN = 4.0


class TextCounter(Protocol):
    """Counts the tokens of a text; `exact` is False for an estimate."""

    @property
    def name(self) -> str: ...

    @property
    def exact(self) -> bool: ...

    def count(self, text: str) -> int: ...


def estimate_text_tokens(text: str) -> int:
    """A CJK-aware estimate: 1.5 chars/token for Chinese, 4 otherwise, mixed linearly."""
    if not text:
        return 0
    cjk = len(_CJK.findall(text))
    ratio = cjk / len(text)
    chars_per_token = ratio * CJK_CHARS_PER_TOKEN + (1 - ratio) * OTHER_CHARS_PER_TOKEN
    return math.ceil(len(text) / chars_per_token)


@dataclass(frozen=True)
class EstimateCounter:
    """The fallback where no tokenizer file is available; its figures are labelled estimated."""

    name: str = "estimate"
    exact: bool = False

    def count(self, text: str) -> int:
        return estimate_text_tokens(text)


ESTIMATE = EstimateCounter()


def message_texts(message: dict[str, Any]) -> list[str]:
    """The texts of a message (as JSON) that the formula encodes, role first."""
    texts = [message["role"]]
    content = message.get("content")
    if isinstance(content, str):
        texts.append(content)
    elif content:
        texts.extend(p["text"] for p in content if p.get("text") is not None)
    if message.get("refusal"):
        texts.append(message["refusal"])
    if message.get("name"):
        texts.append(message["name"])
    for call in message.get("tool_calls") or []:
        texts.extend(stored_call_parts(call))
    return texts


def message_tokens(message: dict[str, Any], counter: TextCounter) -> int:
    """Tokens one message (as JSON) costs in a prompt, by the formula above."""
    framing = PER_MESSAGE
    if message.get("name"):
        framing += PER_NAME
    framing += PER_TOOL_CALL * len(message.get("tool_calls") or [])
    return framing + sum(counter.count(t) for t in message_texts(message) if t)
