"""Summarizers: the offline extractive default, and an OpenAI-compatible chat client."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ctxstore.domain.messages import Message
from ctxstore.domain.summarize import ContextOverflowError
from ctxstore.domain.tokens import ESTIMATE, TextCounter

PROMPT_VERSION = "summary-v1"
SYSTEM_PROMPT = (
    "Summarize the conversation excerpt below for the assistant that will continue it. "
    "Keep decisions, facts learned from tools, open questions and the user's goals; drop "
    "chit-chat. Write plain prose, at most {target} tokens."
)
_SENTENCE = re.compile(r"(?<=[.!?。！？])\s+")


@dataclass(frozen=True)
class ExtractiveSummarizer:
    """Deterministic, offline: the first sentence of each message, and what each tool call did.

    No model, no network: compaction works out of the box and in tests.
    """

    counter: TextCounter = ESTIMATE
    name: str = "extractive"
    model: str = "none"
    prompt_version: str = PROMPT_VERSION

    def summarize(self, messages: Sequence[Message], *, target_tokens: int) -> str:
        lines = []
        for m in messages:
            if m.tool_calls:
                calls = ", ".join(f"{c.tool_name}({_clip(c.tool_input, 60)})" for c in m.tool_calls)
                lines.append(f"assistant called {calls}")
            text = " ".join(m.text().split())
            if text:
                first = _SENTENCE.split(text, maxsplit=1)[0]
                lines.append(f"{m.role}: {_clip(first, 200)}")
        head = "Summary of earlier conversation:"
        budget = target_tokens - self.counter.count(head)
        chosen: list[str] = []
        for line in reversed(lines):  # the most recent points matter most
            cost = self.counter.count(line) + 2
            if cost > budget:
                break
            chosen.append(line)
            budget -= cost
        omitted = len(lines) - len(chosen)
        body = [f"- ({omitted} earlier points omitted)"] if omitted else []
        body += [f"- {line}" for line in reversed(chosen)]
        return "\n".join([head, *body])


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


class OpenAISummarizer:
    """Summaries from any OpenAI-compatible chat-completions endpoint (`pip install ctxstore[openai]`)."""

    name = "openai"
    prompt_version = PROMPT_VERSION

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
    ) -> None:
        try:
            import openai
        except ImportError as exc:  # pragma: no cover - depends on the extra
            raise ImportError(
                "the OpenAI summarizer needs the extra: pip install 'ctxstore[openai]'"
            ) from exc
        self._openai = openai
        self.model = model
        self._client = openai.OpenAI(
            base_url=base_url, api_key=api_key or "not-needed", timeout=timeout, max_retries=0
        )

    def summarize(self, messages: Sequence[Message], *, target_tokens: int) -> str:
        transcript = "\n\n".join(_render(m) for m in messages)
        request: list[Any] = [
            {"role": "system", "content": SYSTEM_PROMPT.format(target=target_tokens)},
            {"role": "user", "content": transcript},
        ]
        try:
            reply = self._client.chat.completions.create(
                model=self.model, messages=request, max_tokens=target_tokens
            )
        except self._openai.BadRequestError as exc:
            if is_context_overflow(exc):
                raise ContextOverflowError(f"{self.model}: {exc}") from exc
            raise
        return reply.choices[0].message.content or ""


def is_context_overflow(exc: Exception) -> bool:
    """The provider's way of saying the input is longer than the model's window."""
    code = getattr(exc, "code", None)
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        code = code or body.get("code") or (body.get("error") or {}).get("code")
    text = str(exc).lower()
    return (
        code == "context_length_exceeded" or "context length" in text or "maximum context" in text
    )


def _render(m: Message) -> str:
    parts = [f"{m.role}{f' ({m.name})' if m.name else ''}: {m.text()}"]
    for c in m.tool_calls or []:
        parts.append(f"  -> {c.tool_name}({c.tool_input})")
    return "\n".join(parts)
