"""The Claude session store's `load` of a long transcript against reading the CLI's JSONL.

    python bench/bench_claude_load.py [--entries 20000] [--pg URL] [--skip-pg] [--runs 5]

A transcript of 20,000 entries (~16 MB as JSONL, as the CLI writes it: a parentUuid
chain of user and assistant entries, tool uses and results among them) is appended to
`CtxStoreSessionStore` on SQLite (and PostgreSQL) and written to a JSONL file. Then, taking
turns, `load(key)` from a freshly opened store (the cold read a resumed session makes) and
the file read and parsed line by line (`json.loads` per line): medians of `--runs`, their
ratio. Peak memory of each (tracemalloc's peak, each in a fresh subprocess so neither pays
for the other's heap), relative to the transcript's size on disk.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
import uuid
from pathlib import Path
from typing import Any

from ctxstore.adapters.store.facade import ContextStore

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/postgres"
PHRASE = "the transcript keeps every entry exactly as the CLI appended it, and a resumed "
WORDS = (PHRASE + "session reads it back whole before its first turn;").split(" ")


def text(n: int, size: int) -> str:
    words = [WORDS[(n * 7 + i) % len(WORDS)] for i in range(size // 6)]
    return " ".join(words)[:size]


def transcript(count: int, session: str) -> list[dict[str, Any]]:
    """`count` entries as the Claude CLI writes them (about 800 bytes each as JSON)."""
    out: list[dict[str, Any]] = []
    parent = None
    for n in range(count):
        uid = str(uuid.uuid4())
        base = {"parentUuid": parent, "isSidechain": False, "userType": "external",
                "cwd": "/home/dev/project", "sessionId": session, "version": "2.0.14",
                "gitBranch": "main"}  # fmt: skip
        if n % 4 == 0:
            message: dict[str, Any] = {"role": "user", "content": text(n, 420)}
            kind = "user"
        elif n % 4 == 1:
            message = {
                "id": f"msg_{n:08d}", "type": "message", "role": "assistant",
                "model": "claude-sonnet-4-5", "stop_reason": "tool_use",
                "stop_sequence": None,
                "usage": {"input_tokens": 1200 + n, "output_tokens": 80,
                          "cache_read_input_tokens": 900, "cache_creation_input_tokens": 0},
                "content": [{"type": "text", "text": text(n, 200)},
                            {"type": "tool_use", "id": f"toolu_{n:08d}", "name": "Read",
                             "input": {"file_path": f"/home/dev/project/src/m{n}.py"}}],
            }  # fmt: skip
            kind = "assistant"
        elif n % 4 == 2:
            message = {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": f"toolu_{n - 1:08d}",
                 "content": text(n, 360)}]}  # fmt: skip
            kind = "user"
        else:
            message = {
                "id": f"msg_{n:08d}", "type": "message", "role": "assistant",
                "model": "claude-sonnet-4-5", "stop_reason": "end_turn", "stop_sequence": None,
                "usage": {"input_tokens": 1500 + n, "output_tokens": 120,
                          "cache_read_input_tokens": 1100, "cache_creation_input_tokens": 0},
                "content": [{"type": "text", "text": text(n, 300)}],
            }  # fmt: skip
            kind = "assistant"
        out.append({**base, "type": kind, "message": message, "uuid": uid,
                    "timestamp": f"2026-11-25T00:{n // 3600 % 60:02d}:{n // 60 % 60:02d}.000Z"})  # fmt: skip
        parent = uid
    return out


KEY = {"project_key": "-home-dev-project", "session_id": "bench-load"}


def prepare(url: str, path: Path, count: int) -> int:
    """The transcript appended to the store (50 entries an append) and written as JSONL;
    its size in bytes."""
    from ctxstore.adapters.integrations.claude_session_store import CtxStoreSessionStore

    entries = transcript(count, KEY["session_id"])
    with path.open("w", encoding="utf-8") as f:
        f.writelines(json.dumps(e, separators=(",", ":")) + "\n" for e in entries)
    with ContextStore.from_url(url) as store:
        ours: Any = CtxStoreSessionStore(store)

        async def fill() -> None:
            for n in range(0, len(entries), 50):
                await ours.append(KEY, entries[n : n + 50])

        asyncio.run(fill())
    return path.stat().st_size


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The CLI's transcript read back: the file parsed line by line."""
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def load(url: str) -> list[dict[str, Any]]:
    """A cold load: a freshly opened store (as a resumed session's process)."""
    from ctxstore.adapters.integrations.claude_session_store import CtxStoreSessionStore

    with ContextStore.from_url(url) as store:
        got = asyncio.run(CtxStoreSessionStore(store).load(KEY))
    assert got is not None
    return got


def timed_load(url: str) -> float:
    """Seconds `load` takes on a freshly opened store (the opening not counted)."""
    from ctxstore.adapters.integrations.claude_session_store import CtxStoreSessionStore

    with ContextStore.from_url(url) as store:
        ours = CtxStoreSessionStore(store)
        ours.store.lookup_key("warm the connection")
        t = time.perf_counter()
        got = asyncio.run(ours.load(KEY))
        spent = time.perf_counter() - t
    assert got is not None
    return spent


def peak(which: str, url: str, path: Path) -> int:
    """tracemalloc's peak over one load (or one read of the file), in a fresh process."""
    found = subprocess.run(
        [sys.executable, __file__, "--peak", which, "--url", url, "--file", str(path)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return int(found.stdout.strip().splitlines()[-1])


def peak_here(which: str, url: str, path: Path) -> int:
    from ctxstore.adapters.integrations.claude_session_store import CtxStoreSessionStore

    if which == "jsonl":
        tracemalloc.start()
        got = read_jsonl(path)
    else:
        with ContextStore.from_url(url) as store:
            ours = CtxStoreSessionStore(store)
            ours.store.lookup_key("warm the connection")
            tracemalloc.start()
            found = asyncio.run(ours.load(KEY))
            got = found or []
    assert got
    return tracemalloc.get_traced_memory()[1]


def measure(url: str, label: str, folder: Path, count: int, runs: int) -> None:
    path = folder / f"{label}.jsonl"
    size = prepare(url, path, count)
    assert load(url) == read_jsonl(path)  # exactly as appended
    ours, theirs = [], []
    for _ in range(runs):  # taking turns: the machine's drift falls on both
        ours.append(timed_load(url))
        t = time.perf_counter()
        read_jsonl(path)
        theirs.append(time.perf_counter() - t)
    a, b = statistics.median(ours), statistics.median(theirs)
    pa, pb = peak("ctxstore", url, path), peak("jsonl", url, path)
    print(f"\nClaude session store load, {label}: {count:,} entries, {size / 1e6:.1f} MB JSONL")
    print(f"  load: {a * 1e3:,.0f} ms (ctxstore) vs {b * 1e3:,.0f} ms (JSONL read+parse) "
          f"= {b / a:.2f}x (target >= 0.25x)")  # fmt: skip
    print(f"  peak memory: {pa / 1e6:,.1f} MB = {pa / size:.1f}x the transcript (ctxstore) vs "
          f"{pb / 1e6:,.1f} MB = {pb / size:.1f}x (JSONL reader)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--entries", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--pg", default=DEFAULT_PG)
    parser.add_argument("--skip-pg", action="store_true")
    parser.add_argument("--peak", choices=("ctxstore", "jsonl"))
    parser.add_argument("--url")
    parser.add_argument("--file")
    args = parser.parse_args()
    if args.peak:
        print(peak_here(args.peak, args.url, Path(args.file)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        measure(f"sqlite:///{folder / 'claude.db'}", "SQLite", folder, args.entries, args.runs)
        if not args.skip_pg:
            sys.path.insert(0, str(Path(__file__).parent))
            from scratch_pg import scratch_databases

            with scratch_databases(args.pg) as fresh:
                measure(fresh(), "PostgreSQL", folder, args.entries, args.runs)


if __name__ == "__main__":
    main()
