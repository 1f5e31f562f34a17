"""Summarizers: the offline extractive default, and an OpenAI-compatible chat client."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ctxstore.domain.errors import ContextOverflowError, MissingExtraError
from ctxstore.domain.messages import Message
from ctxstore.domain.tokens import ESTIMATE, TextCounter

PROMPT_VERSION = "summary-v1"
SYSTEM_PROMPT = (
    "Summarize the conversation excerpt below for the assistant that will continue it. "
    "Keep decisions, facts learned from tools, open questions and the user's goals; drop "
    "chit-chat. Write plain prose, at most {target} tokens."
)
_SENTENCE = re.compile(r"(?<=[.!?。！？])\s+")


FIRST_REQUEST_CHARS = 600  # of the first user request, at most (within half the budget)
TOOL_CHARS = 80  # of a tool's output, at most
MIN_REQUEST_CHARS = 48  # shorter than this, a clipped request says too little to keep


@dataclass(frozen=True)
class ExtractiveSummarizer:
    """Deterministic, offline: the first user request (the task and its constraints), then
    the first sentence of each later message and what each tool call did, the most recent
    first to be kept; the summary says how many points it left out, and whose.

    No model, no network: compaction works out of the box and in tests.
    """

    counter: TextCounter = ESTIMATE
    name: str = "extractive"
    model: str = "none"
    prompt_version: str = PROMPT_VERSION

    def summarize(self, messages: Sequence[Message], *, target_tokens: int) -> str:
        points = _points(messages)
        head = "Summary of earlier conversation:"
        budget = target_tokens - self.counter.count(head)
        first = next((n for n, (kind, _) in enumerate(points) if kind == "request"), None)
        budget -= self.counter.count(_left_out(points, range(len(points)))) + 2  # room to say so
        kept: dict[int, str] = {}
        if first is not None:
            line = self._fitting(f"user (first request): {points[first][1]}", budget // 2)
            if line:
                kept[first] = line
                budget -= self.counter.count(line) + 2
        for n in range(len(points) - 1, -1, -1):  # then the most recent points
            if n in kept:
                continue
            cost = self.counter.count(points[n][1]) + 2
            if cost > budget:
                break
            kept[n] = points[n][1]
            budget -= cost
        body: list[str] = []
        left_out: list[int] = []
        for n in range(len(points)):
            if n not in kept:
                left_out.append(n)
                continue
            if left_out:
                body.append(f"- {_left_out(points, left_out)}")
                left_out = []
            body.append(f"- {kept[n]}")
        if left_out:
            body.append(f"- {_left_out(points, left_out)}")
        return "\n".join([head, *body])

    def _fitting(self, line: str, tokens: int) -> str:
        """The line, clipped to FIRST_REQUEST_CHARS and then to `tokens`; "" when what would
        fit is too short to say anything."""
        line = _clip(line, FIRST_REQUEST_CHARS)
        while line and self.counter.count(line) + 2 > tokens:
            line = _clip(line, len(line) * 3 // 4) if len(line) > MIN_REQUEST_CHARS else ""
        return line


def _points(messages: Sequence[Message]) -> list[tuple[str, str]]:
    """(kind, line) per point: "request" for a message the user wrote (the first of them is
    kept whole), "call" for tool calls, else the speaker's role."""
    points: list[tuple[str, str]] = []
    for m in messages:
        if m.tool_calls:
            calls = ", ".join(f"{c.tool_name}({_clip(c.tool_input, 60)})" for c in m.tool_calls)
            points.append(("call", f"assistant called {calls}"))
        text = " ".join(m.text().split())
        if not text:
            continue
        summary = (m.metadata or {}).get("ctxstore") == "summary"
        if m.role == "user" and not summary and not any(k == "request" for k, _ in points):
            points.append(("request", text))
            continue
        first = _SENTENCE.split(text, maxsplit=1)[0]
        # A tool's output says what it did in its opening words; the rest is its data.
        points.append(
            (m.role, f"{m.role}: {_clip(first, TOOL_CHARS if m.role == 'tool' else 200)}")
        )
    return points


def _left_out(points: Sequence[tuple[str, str]], indices: Sequence[int] | range) -> str:
    """What a run of left-out points held: how many, and whose."""
    kinds: dict[str, int] = {}
    for n in indices:
        kind = {"request": "user", "call": "tool call"}.get(points[n][0], points[n][0])
        kinds[kind] = kinds.get(kind, 0) + 1
    whose = ", ".join(f"{count} {kind}" for kind, count in kinds.items())
    return f"({len(indices)} points left out here: {whose})"


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
        except ModuleNotFoundError as exc:
            raise MissingExtraError("the OpenAI summarizer", "openai") from exc
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
