"""The summarization engine: bisect the input when the summarizer overflows.

Try the whole input; on a context overflow split it in two where no tool call is separated
from its results, summarize each half recursively and merge the partial summaries
(pairwise reduction when the merge overflows too). Limits: `max_depth` levels of
splitting and `min_chunk_messages` per piece; below them the input is truncated and the
result marked `truncated`. Only ContextOverflowError recurses: every other error from the
summarizer (authentication, rate limit, network) propagates unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ctxstore.domain.errors import ContextOverflowError
from ctxstore.domain.messages import Message
from ctxstore.domain.shapes import RESULT_ROLES

ALGORITHM = "bisect_v1"


class Summarizer(Protocol):
    """Port to whatever writes summaries (a model, or the offline extractive summarizer)."""

    @property
    def name(self) -> str: ...

    @property
    def model(self) -> str: ...

    @property
    def prompt_version(self) -> str: ...

    def summarize(self, messages: Sequence[Message], *, target_tokens: int) -> str:
        """A summary of the messages; raises ContextOverflowError when they are too long."""
        ...


@dataclass
class SummaryResult:
    """The summary and how it was made."""

    text: str
    chunks: int = 1  # pieces of the input summarized separately
    depth: int = 0  # deepest level of splitting reached
    truncated: bool = False
    calls: int = 0  # summarizer calls, failed ones included
    notes: list[str] = field(default_factory=list)


@dataclass
class _Run:
    summarizer: Summarizer
    target_tokens: int
    max_depth: int
    min_chunk: int
    result: SummaryResult = field(default_factory=lambda: SummaryResult(""))

    def call(self, messages: Sequence[Message]) -> str:
        self.result.calls += 1
        return self.summarizer.summarize(messages, target_tokens=self.target_tokens)


def summarize_with_bisect(
    messages: Sequence[Message],
    summarizer: Summarizer,
    *,
    target_tokens: int = 500,
    max_depth: int = 6,
    min_chunk_messages: int = 4,
) -> SummaryResult:
    """Summarize `messages`, splitting in two on overflow."""
    if not messages:
        raise ValueError("nothing to summarize")
    run = _Run(summarizer, target_tokens, max_depth, max(1, min_chunk_messages))
    text, chunks = _summarize(run, list(messages), 0)
    run.result.text = text
    run.result.chunks = chunks
    return run.result


def _summarize(run: _Run, messages: list[Message], depth: int) -> tuple[str, int]:
    run.result.depth = max(run.result.depth, depth)
    try:
        return run.call(messages), 1
    except ContextOverflowError:
        pass
    halves = split_for_summary(messages)
    if halves is None or depth >= run.max_depth or len(messages) < 2 * run.min_chunk:
        return _truncated(run, messages), 1
    left, right = halves
    left_text, left_chunks = _summarize(run, left, depth + 1)
    right_text, right_chunks = _summarize(run, right, depth + 1)
    return _merge(run, [left_text, right_text], depth + 1), left_chunks + right_chunks


def _merge(run: _Run, summaries: list[str], depth: int) -> str:
    """One summary of partial summaries; pairwise reduction when they overflow together."""
    if len(summaries) == 1:
        return summaries[0]
    parts = [_partial(i, s) for i, s in enumerate(summaries)]
    try:
        return run.call(parts)
    except ContextOverflowError:
        pass
    run.result.depth = max(run.result.depth, depth)
    if len(summaries) > 2 and depth < run.max_depth:
        pairs = [summaries[i : i + 2] for i in range(0, len(summaries), 2)]
        return _merge(run, [_merge(run, p, depth + 1) for p in pairs], depth + 1)
    if depth < run.max_depth:
        # Two summaries too long together: shorten each on its own, then merge again.
        shorter = []
        for s in summaries:
            try:
                shorter.append(run.call([_partial(0, s)]))
            except ContextOverflowError:
                shorter.append(_cut(s, 0.5))
                run.result.truncated = True
        if sum(map(len, shorter)) < sum(map(len, summaries)):
            return _merge(run, shorter, depth + 1)
    return _truncated(run, parts)


def _truncated(run: _Run, messages: list[Message]) -> str:
    """Last resort: cut the input's texts until the summarizer takes them."""
    run.result.truncated = True
    keep = 0.5
    while keep > 0.001:
        cut = [
            m.model_copy(update={"content": _cut(m.text(), keep)}) if m.text() else m
            for m in messages
        ]
        try:
            return run.call(cut)
        except ContextOverflowError:
            keep /= 2
    run.result.notes.append("input could not be cut small enough; kept its opening only")
    return _cut(" ".join(m.text() for m in messages), 0.001)


def _cut(text: str, keep: float) -> str:
    n = max(1, int(len(text) * keep))
    return text[:n] + (" [truncated]" if n < len(text) else "")


def _partial(i: int, text: str) -> Message:
    return Message(role="user", content=f"Partial summary {i + 1}:\n{text}")


def split_for_summary(messages: Sequence[Message]) -> tuple[list[Message], list[Message]] | None:
    """Two non-empty halves near the middle that keep each tool call with its results."""
    cuts = [
        i
        for i in range(1, len(messages))
        if messages[i].role not in RESULT_ROLES  # a tool result stays with its call
    ]
    if not cuts:
        return None
    middle = len(messages) / 2
    best = min(cuts, key=lambda i: (abs(i - middle), i))
    return list(messages[:best]), list(messages[best:])


def compaction_stats(
    result: SummaryResult, summarizer: Summarizer, planner: dict[str, Any], trigger: str,
    tokens_before: int,
) -> dict[str, Any]:  # fmt: skip
    """What a compaction's MessagesCompressed event records about how its summary was made."""
    return {
        "algorithm": ALGORITHM,
        "trigger": trigger,
        "chunk_count": result.chunks,
        "max_depth": result.depth,
        "truncated": result.truncated,
        "summarizer_calls": result.calls,
        "summarizer": {
            "name": summarizer.name,
            "model": summarizer.model,
            "prompt_version": summarizer.prompt_version,
        },
        "planner": planner,
        "tokens_before_visible": tokens_before,
    }
