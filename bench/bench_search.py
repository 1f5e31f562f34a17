"""Search benchmark: what the index costs a write, a query against the bare engine, rebuilds.

Targets (issue 54): a single-message insert with the index on >= 0.8x the rate with it off;
a two-word query over 50,000 messages in 2,000 contexts <= 3x the same query run directly
on a bare FTS5 table with the same texts (SQLite), and likewise against bare PostgreSQL
full-text search (a tsvector column under a GIN index); the index's rebuild rate.

Ratios are measured in one run, the two sides taking turns, the median of 5 blocks.
Usage: python bench/bench_search.py [--contexts 2000] [--per 25] [--pg URL] [--skip-pg]
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from scratch_pg import scratch_databases

from ctxstore.adapters.settings import SearchSettings, Settings
from ctxstore.adapters.store.facade import ContextStore

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/postgres"
WORDS = [
    "order",
    "refund",
    "delayed",
    "shipping",
    "invoice",
    "address",
    "customer",
    "payment",
    "card",
    "account",
    "password",
    "weather",
    "forecast",
    "paris",
    "tokyo",
    "meeting",
    "notes",
    "launch",
    "budget",
    "review",
    "deadline",
    "contract",
    "error",
    "timeout",
    "retry",
    "database",
    "index",
    "query",
    "cache",
    "server",
    "deploy",
    "release",
    "branch",
    "test",
    "café",
    "crème",
    "straße",
    "über",
    "naïve",
    "résumé",
    "会议",
    "记录",
    "发送",
    "邮件",
    "天気",
    "東京",
    "회의",
    "일정",
]
QUERY = "order delayed"  # two words, each in about a tenth of the messages
BLOCKS = 5


def corpus(contexts: int, per: int, seed: int = 7) -> list[list[str]]:
    rng = random.Random(seed)
    return [
        [" ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 40))) for _ in range(per)]
        for _ in range(contexts)
    ]


def median_ratio(
    ours: Callable[[], Any], theirs: Callable[[], Any], rounds: int
) -> tuple[float, float, float]:
    """(ours seconds, theirs seconds, ours/theirs) per call, median of BLOCKS interleaved
    blocks of `rounds` calls each."""
    mine, other = [], []
    for _ in range(BLOCKS):
        t = time.perf_counter()
        for _ in range(rounds):
            ours()
        mine.append((time.perf_counter() - t) / rounds)
        t = time.perf_counter()
        for _ in range(rounds):
            theirs()
        other.append((time.perf_counter() - t) / rounds)
    a, b = statistics.median(mine), statistics.median(other)
    return a, b, a / b


def fill(store: ContextStore, texts: list[list[str]]) -> None:
    for n, messages in enumerate(texts):
        cid = store.create(name=f"c{n}")
        store.insert(cid, [{"role": "user" if i % 2 else "assistant", "content": t}
                           for i, t in enumerate(messages)])  # fmt: skip


def inserts(folder: Path) -> None:
    """Single-message inserts with the index on against off: the index is off the write
    path, so the write is the same; what a service's refresher does every second is done
    every 100 writes on both sides (the audit index's catch-up, which either keeps), and on
    the side with the index, the search index's too."""
    on = ContextStore.from_url(f"sqlite:///{folder / 'on.db'}")
    off = ContextStore.from_url(
        f"sqlite:///{folder / 'off.db'}", Settings(search=SearchSettings(enabled=False))
    )
    texts = corpus(1, 4000)[0]
    counter = [0, 0]
    ids = [on.create(), off.create()]

    def write(side: int, store: ContextStore, refresh: bool) -> Callable[[], None]:
        def one() -> None:
            n = counter[side]
            counter[side] += 1
            store.insert(ids[side], {"role": "user", "content": texts[n % len(texts)]})
            if n % 100 == 99:
                store.admin.refresh_audit_index()
                if refresh:
                    store.admin.refresh_search_index()

        return one

    a, b, _ = median_ratio(write(0, on, True), write(1, off, False), 200)
    print(f"single-message insert, SQLite: index on {1 / a:,.0f}/s (catch-ups every 100), "
          f"off {1 / b:,.0f}/s = {b / a:.2f}x the rate (target >= 0.8x)")  # fmt: skip
    on.close()
    off.close()


def filled_and_rebuilt(store: ContextStore, texts: list[list[str]], label: str) -> int:
    """Write the corpus, time a rebuild of the index; the messages written."""
    fill(store, texts)
    t = time.perf_counter()
    _, indexed = store.admin.reindex()
    took = time.perf_counter() - t
    print(f"rebuild, {label}: {indexed:,} messages in {took:.1f} s = {indexed / took:,.0f}/s")
    return sum(len(t) for t in texts)


def sqlite_query(folder: Path, texts: list[list[str]]) -> None:
    url = f"sqlite:///{folder / 'search.db'}"
    with ContextStore.from_url(url) as store:
        rows = filled_and_rebuilt(store, texts, "SQLite")
        bare = sqlite3.connect(folder / "bare.db")
        bare.execute("CREATE VIRTUAL TABLE t USING fts5(body)")
        bare.executemany("INSERT INTO t (body) VALUES (?)", [(m,) for c in texts for m in c])
        bare.commit()
        sql = "SELECT rowid, snippet(t, 0, '«', '»', '…', 16), bm25(t) FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT 20"
        words = " AND ".join(f'"{w}"' for w in QUERY.split())
        compare_query(store, lambda: bare.execute(sql, (words,)).fetchall(), "SQLite",
                      "bare FTS5", rows, len(texts))  # fmt: skip
        bare.close()


def postgres_query(url: str, bare_url: str, texts: list[list[str]]) -> None:
    with ContextStore.from_url(url) as store:
        rows = filled_and_rebuilt(store, texts, "PostgreSQL")
        with psycopg.connect(bare_url, autocommit=True) as bare:
            bare.execute("CREATE TABLE t (id bigserial PRIMARY KEY, body text, terms tsvector)")
            with bare.cursor() as c:
                c.executemany(
                    "INSERT INTO t (body, terms) VALUES (%s, to_tsvector('simple', %s))",
                    [(m, m) for ctx in texts for m in ctx],
                )
            bare.execute("CREATE INDEX ON t USING gin (terms)")
            bare.execute("ANALYZE t")
            sql = (
                "SELECT id, body, ts_rank_cd(terms, q) AS r FROM t, plainto_tsquery('simple', %s) q "
                "WHERE terms @@ q ORDER BY r DESC, id LIMIT 20"
            )
            compare_query(store, lambda: bare.execute(sql, (QUERY,)).fetchall(),
                          "PostgreSQL", "bare full-text search", rows, len(texts))  # fmt: skip


def compare_query(
    store: ContextStore, bare: Callable[[], Any], label: str, engine: str, rows: int,
    contexts: int,
) -> None:  # fmt: skip
    """The two-word query through ctxstore against the same on the bare engine."""
    hits = len(store.search(QUERY, limit=20).hits)
    a, b, ratio = median_ratio(lambda: store.search(QUERY, limit=20), bare, 20)
    print(f"two-word query over {rows:,} messages in {contexts:,} contexts, {label}: "
          f"{a * 1e3:.2f} ms vs {engine} {b * 1e3:.2f} ms = {ratio:.2f}x (target <= 3x; "
          f"{hits} hits a page)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contexts", type=int, default=2000)
    parser.add_argument("--per", type=int, default=25)
    parser.add_argument("--pg", default=DEFAULT_PG)
    parser.add_argument("--skip-pg", action="store_true")
    args = parser.parse_args()
    texts = corpus(args.contexts, args.per)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        inserts(folder)
        sqlite_query(folder, texts)
    if not args.skip_pg:
        with scratch_databases(args.pg) as fresh:
            postgres_query(fresh(), fresh(), texts)


if __name__ == "__main__":
    main()
