"""The token formula and seed 004's estimate, without a tokenizer."""

from dataclasses import dataclass

from ctxstore.domain.tokens import (
    ESTIMATE,
    LEGACY_COSTS,
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


def test_the_estimate_prices_each_script():
    assert estimate_text_tokens("这" * 24) == 30  # 1.25 a Han character (o200k's side)
    assert estimate_text_tokens("这" * 24, LEGACY_COSTS) == 48  # 2 for cl100k and earlier
    assert estimate_text_tokens("かな" * 5) == 11 and estimate_text_tokens("한국어") == 4
    assert estimate_text_tokens("a" * 100) == 25  # a long Latin run: 4 letters a token
    assert estimate_text_tokens("the cat sat") == 3  # short words: one each
    assert estimate_text_tokens("2026") == 2 and estimate_text_tokens("") == 0
    # The seed's sentence: 21 Han characters and punctuation, and "Token".
    assert estimate_text_tokens("这是一段中文测试文本，用于验证Token估算准确性。") == 27


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
    assert message_tokens({"role": "user", "content": "这" * 24}, ESTIMATE) == PER_MESSAGE + 1 + 30


def test_the_estimate_errs_on_the_safe_side_on_real_multilingual_text():
    """Against exact o200k_base and cl100k_base, on EN/ZH/JA/KO text: never under by more
    than 5 % on any text, and not wildly over (median at most 1.8x)."""
    import json
    import statistics
    from pathlib import Path

    from ctxstore.adapters.llm.tokenizer import Tokenizers
    from ctxstore.domain.tokens import ESTIMATE, LEGACY_ESTIMATE

    corpus = json.loads((Path(__file__).parents[1] / "fixtures" / "multilingual.json").read_text())
    tokenizers = Tokenizers(None)
    for encoding, estimate in (("o200k_base", ESTIMATE), ("cl100k_base", LEGACY_ESTIMATE)):
        exact = tokenizers.counter(encoding)
        assert exact.exact
        for language, texts in corpus["texts"].items():
            ratios = [estimate.count(t) / exact.count(t) for t in texts]
            assert min(ratios) >= 0.95, (encoding, language, min(ratios))
            assert statistics.median(ratios) <= 1.8, (encoding, language)
