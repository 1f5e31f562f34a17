"""The half-window planner (seed 000) and the bisect summarization engine (seed 001)."""

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxstore.domain.compaction import Entry, plan_compaction, rounds_of
from ctxstore.domain.errors import ContextOverflowError, NothingToSummarizeError
from ctxstore.domain.messages import Message
from ctxstore.domain.summarize import summarize_with_bisect
from ctxstore.domain.tokens import ESTIMATE, message_tokens
from ctxstore.domain.transcript import check_transcript, pairing_closure_violation

from ..conftest import examples

ROLES = {"s": "system", "u": "user", "a": "assistant", "c": "assistant", "t": "tool", "S": "user"}


def entries(spec: str) -> list[Entry]:
    """s system, u user, a assistant, c assistant with calls, t tool result, S summary."""
    return [Entry(f"{ch}{i}", ROLES[ch], ch == "S") for i, ch in enumerate(spec)]


def test_rounds_and_turns_are_read_off_the_visible_context():
    rounds = rounds_of(entries("sucttauctt"))
    assert [(r.start, r.end, r.turn) for r in rounds] == [(2, 5, 1), (5, 6, 1), (7, 10, 6)]


def test_seed_six_active_rounds_keep_three_summarize_three():
    plan = plan_compaction(entries("su" + "ct" * 6))
    s = plan.stats
    assert (s.mode, s.total_rounds, s.summarized_rounds, s.kept_rounds) == ("half-window", 6, 3, 3)
    assert s.split_strategy == "active-only"
    assert plan.summarize == ["c2", "t3", "c4", "t5", "c6", "t7"]  # the user message stays


def test_seed_ten_rounds_across_three_turns_split_at_a_turn_start():
    plan = plan_compaction(entries("uctctct" + "uctctct" + "uctctctct"))
    s = plan.stats
    assert (s.total_rounds, s.summarized_rounds, s.kept_rounds) == (10, 3, 7)
    assert (s.split_strategy, s.boundary_adjustment) == ("turn-boundary", "adjusted-to-turn-start")
    assert plan.summarize == [f"{ch}{i}" for i, ch in enumerate("uctctct")]


def test_a_split_with_no_earlier_turn_start_moves_to_the_next_turn():
    first = "u" + "ct" * 6
    plan = plan_compaction(entries(first + "uctct" + "ua"))
    assert plan.stats.boundary_adjustment == "adjusted-to-turn-end"
    assert (plan.stats.summarized_rounds, plan.stats.kept_rounds) == (6, 3)
    assert plan.summarize == [f"{ch}{i}" for i, ch in enumerate(first)]


def test_seed_three_rounds_fall_back_to_single_round():
    plan = plan_compaction(entries("uctcta"))
    s = plan.stats
    assert (s.mode, s.fallback_reason, s.kept_rounds) == ("single-round", "not-enough-rounds", 1)
    assert plan.summarize == ["c1", "t2", "c3", "t4"]


def test_seed_summary_boundary_skips_and_says_why():
    plan = plan_compaction(entries("Sucucta"))
    assert plan.skipped and "since the latest summary" in plan.skipped
    assert plan.stats.fallback_reason == "summary-boundary" and plan.summarize == []
    # With enough rounds after it, the summary only bounds what is planned.
    after = plan_compaction(entries("uctS" + "uca" * 6))
    assert after.summarize[0] == "u4" and "S3" not in after.summarize


def test_seed_nothing_to_summarize_is_a_clear_error():
    for spec in ("", "u", "su", "ua", "sua"):
        with pytest.raises(NothingToSummarizeError, match="nothing to summarize"):
            plan_compaction(entries(spec))


@st.composite
def transcripts(draw):
    spec = "s" if draw(st.booleans()) else ""
    for _ in range(draw(st.integers(1, 30))):
        kind = draw(st.sampled_from(["u", "a", "c", "S"]))
        spec += kind + ("t" * draw(st.integers(1, 3)) if kind == "c" else "")
    return spec


@settings(max_examples=examples(400), deadline=None)
@given(spec=transcripts())
def test_plans_replace_a_contiguous_run_of_whole_rounds_and_keep_the_newest_user(spec):
    es = entries(spec)
    try:
        plan = plan_compaction(es)
    except NothingToSummarizeError:
        return
    if plan.skipped:
        assert plan.summarize == []
        return
    ids = [e.id for e in es]
    positions = [ids.index(i) for i in plan.summarize]
    assert positions and positions == list(range(positions[0], positions[-1] + 1))
    messages = {e.id: _as_message(e) for e in es}
    assert pairing_closure_violation(set(plan.summarize), ids, messages) is None
    users = [e.id for e in es if e.role == "user" and not e.summary]
    if users:
        assert users[-1] not in plan.summarize
    assert not any(es[p].summary for p in positions)  # earlier summaries are not re-summarized
    s = plan.stats
    assert s.summarized_rounds + s.kept_rounds == s.total_rounds
    if s.mode == "half-window":
        assert s.kept_rounds >= 2 and s.summarized_rounds >= 1


def _as_message(e: Entry) -> dict:
    if e.role == "tool":
        return {"role": "tool", "tool_call_id": "x", "content": "r"}
    if e.id.startswith("c"):
        return {"role": "assistant", "tool_calls": [{"id": "x", "function": {"name": "f"}}]}
    return {"role": e.role, "content": "x"}


# ---- the engine ------------------------------------------------------------------------------


class WindowedSummarizer:
    """A fake model with a window: overflows above `window` input tokens, else summarizes."""

    name = "fake"
    model = "fake-window"
    prompt_version = "test"

    def __init__(self, window: int, fail_with: Exception | None = None) -> None:
        self.window = window
        self.fail_with = fail_with
        self.inputs: list[list[Message]] = []

    def summarize(self, messages: Sequence[Message], *, target_tokens: int) -> str:
        self.inputs.append(list(messages))
        if self.fail_with is not None:
            raise self.fail_with
        size = sum(message_tokens(m.model_dump(mode="json"), ESTIMATE) for m in messages)
        if size > self.window:
            raise ContextOverflowError(f"{size} tokens > window {self.window}")
        return f"summary of {len(messages)} message(s)"


def long_conversation(turns: int, words: int = 60) -> list[Message]:
    out = []
    for t in range(turns):
        out.append(Message(id=f"u{t}", role="user", content=f"question {t} " + "word " * words))
        out.append(
            Message(
                id=f"c{t}",
                role="assistant",
                tool_calls=[{"id": f"k{t}", "function": {"name": "f", "arguments": "{}"}}],
            )
        )
        out.append(
            Message(id=f"t{t}", role="tool", tool_call_id=f"k{t}", content="result " * words)
        )
        out.append(Message(id=f"a{t}", role="assistant", content="answer " * words))
    return out


def test_input_that_fits_is_summarized_in_one_call():
    fake = WindowedSummarizer(window=100_000)
    result = summarize_with_bisect(long_conversation(5), fake)
    assert (result.chunks, result.depth, result.truncated, result.calls) == (1, 0, False, 1)


def test_overflow_bisects_until_it_converges_and_merges_the_halves():
    messages = long_conversation(16)
    fake = WindowedSummarizer(window=700)
    result = summarize_with_bisect(messages, fake, max_depth=6, min_chunk_messages=2)
    assert result.text.startswith("summary of") and not result.truncated
    assert result.chunks > 1 and 1 <= result.depth <= 6
    for call in fake.inputs:  # no call ever saw a tool result without the call that made it
        check_transcript([(m.id or f"p{i}", m.model_dump(mode="json")) for i, m in enumerate(call)])


def test_the_depth_limit_stops_recursion_and_marks_truncation():
    fake = WindowedSummarizer(window=300)
    result = summarize_with_bisect(long_conversation(16), fake, max_depth=1, min_chunk_messages=2)
    assert result.depth <= 2 and result.truncated


def test_a_single_message_that_overflows_is_truncated():
    huge = [Message(id="u", role="user", content="word " * 5000)]
    result = summarize_with_bisect(huge, WindowedSummarizer(window=500))
    assert result.truncated and result.text.startswith("summary of")


class RateLimitedError(Exception):
    """Stands for a provider's rate-limit or authentication error."""


def test_other_errors_propagate_unchanged_without_recursion():
    boom = RateLimitedError("429 too many requests")
    fake = WindowedSummarizer(window=10, fail_with=boom)
    with pytest.raises(RateLimitedError) as info:
        summarize_with_bisect(long_conversation(8), fake)
    assert info.value is boom and len(fake.inputs) == 1


def _conversation(turns: int, words: int = 3) -> list:
    from ctxstore.domain.messages import Message

    msgs = [Message(role="user", content="Migrate the orders table. Keep it online. Budget 2h.")]
    for t in range(turns):
        msgs.append(Message(role="assistant", content=f"Step {t} done. " + "detail " * words))
        msgs.append(Message(role="user", content=f"Fine {t}. Go on."))
    return msgs


def test_the_extractive_summary_keeps_the_first_request_and_the_latest_points():
    from ctxstore.adapters.llm.summarizers import ExtractiveSummarizer

    text = ExtractiveSummarizer().summarize(_conversation(60), target_tokens=200)
    lines = text.splitlines()
    assert "Migrate the orders table. Keep it online. Budget 2h." in lines[1]
    assert "points left out here" in lines[2] and "assistant" in lines[2] and "user" in lines[2]
    assert lines[-1] == "- user: Fine 59."


@given(turns=st.integers(0, 80), words=st.integers(0, 60), target=st.integers(16, 600))
def test_the_extractive_summary_stays_within_its_budget(turns, words, target):
    from ctxstore.adapters.llm.summarizers import ExtractiveSummarizer
    from ctxstore.domain.tokens import ESTIMATE

    text = ExtractiveSummarizer().summarize(_conversation(turns, words), target_tokens=target)
    head = "Summary of earlier conversation:"
    assert text.startswith(head)
    # At the smallest budgets: the head and what was left out, a line break between.
    left_out = ESTIMATE.count("- (161 points left out here: 80 assistant, 81 user)")
    assert ESTIMATE.count(text) <= max(target, ESTIMATE.count(head) + 1 + left_out)
