"""The o200k_base encoder (≈60 MB of ranks, 0.3 s to build) is built once per process,
not once per store: a process that opens many stores neither slows nor grows with them."""

from ctxstore.adapters.llm.tokenizer import Tokenizers, packaged_o200k


def test_every_store_shares_one_encoder():
    first = Tokenizers(None).counter("o200k_base")
    second = Tokenizers(None).counter("o200k_base")
    assert packaged_o200k() is not None  # the packaged file is a dependency: it is here
    assert first.encoding is second.encoding
    assert first.count("hello world") == second.count("hello world")
