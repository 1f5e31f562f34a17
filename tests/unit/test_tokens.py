"""The token formula and seed 004's estimate, without a tokenizer."""

from dataclasses import dataclass

from ctxstore.domain.tokens import (
    ESTIMATE,
    PER_MESSAGE,
    PER_NAME,
    PER_TOOL_CALL,
    estimate_text_tokens,
    message_tokens,
)


@dataclass(frozen=True)
class WordCounter:
    """A fake tokenizer: one token per whitespace-separated word."""

    name: str = "words"
    exact: bool = True

    def count(self, text: str) -> int:
        return len(text.split())


def test_seed_004_chinese_estimate():
    assert estimate_text_tokens("这" * 24) == 16  # 24 Chinese chars / 1.5
    assert estimate_text_tokens("a" * 100) == 25  # English: 4 chars per token
    # The seed's sentence has 26 characters, 5 of them Latin: a linear mix of the two rates.
    sentence = "这是一段中文测试文本，用于验证Token估算准确性。"
    assert len(sentence) == 26
    ratio = 21 / 26
    assert estimate_text_tokens(sentence) == -(-26 // (ratio * 1.5 + (1 - ratio) * 4))
    assert estimate_text_tokens("") == 0


def test_formula_counts_every_billed_part():
    w = WordCounter()
    assert message_tokens({"role": "user", "content": "one two three"}, w) == PER_MESSAGE + 1 + 3
    assert (
        message_tokens({"role": "user", "content": "hi", "name": "bob"}, w)
        == PER_MESSAGE + PER_NAME + 1 + 1 + 1
    )
    parts = {
        "role": "user",
        "content": [
            {"type": "text", "text": "a b"},
            {"type": "image_url", "image_url": {"url": "x"}},
            {"type": "text", "text": "c"},
        ],
    }
    assert message_tokens(parts, w) == PER_MESSAGE + 1 + 2 + 1
    calls = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "x y"}},
            {"id": "c2", "type": "function", "function": {"name": "g", "arguments": ""}},
        ],
    }
    assert message_tokens(calls, w) == PER_MESSAGE + 2 * PER_TOOL_CALL + 1 + (1 + 2) + (1 + 0)
    tool = {"role": "tool", "tool_call_id": "c1", "content": "result here"}
    assert message_tokens(tool, w) == PER_MESSAGE + 1 + 2  # the call id is not sent as text


def test_estimate_is_labelled():
    assert ESTIMATE.exact is False
    assert message_tokens({"role": "user", "content": "这" * 24}, ESTIMATE) == PER_MESSAGE + 1 + 16
