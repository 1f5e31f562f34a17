"""Native shapes: the cost of inserting a Responses item, an Anthropic message or a Gemini
Content against a chat message of the same size, and of converting a 1,000-message context between shapes.
Ratios measured in one run (this machine is noisy).

    python bench/bench_shapes.py [--messages 2000] [--url sqlite:///...]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from ctxstore.adapters.store.facade import ContextStore

SHAPES = ("openai-chat", "openai-responses", "anthropic", "gemini")
TEXT = "The build passed; 412 tests ran in 38 s. Next: deploy to staging and watch the logs. "


def turn(shape: str, n: int) -> list[dict[str, Any]]:
    call = f"call_{n}"
    if shape == "openai-chat":
        return [
            {"role": "user", "content": TEXT},
            {"role": "assistant", "tool_calls": [{"id": call, "type": "function",
             "function": {"name": "run_ci", "arguments": '{"job": "build"}'}}]},
            {"role": "tool", "tool_call_id": call, "content": TEXT},
            {"role": "assistant", "content": TEXT},
        ]  # fmt: skip
    if shape == "openai-responses":
        return [
            {"type": "message", "role": "user", "content": TEXT},
            {"type": "function_call", "id": f"fc_{n}", "call_id": call, "name": "run_ci",
             "arguments": '{"job": "build"}'},
            {"type": "function_call_output", "call_id": call, "output": TEXT},
            {"type": "message", "id": f"msg_{n}", "role": "assistant",
             "content": [{"type": "output_text", "text": TEXT, "annotations": []}]},
        ]  # fmt: skip
    if shape == "gemini":
        return [
            {"role": "user", "parts": [{"text": TEXT}]},
            {"role": "model", "parts": [{"function_call": {"id": call, "name": "run_ci",
                                                           "args": {"job": "build"}}}]},
            {"role": "user", "parts": [{"function_response": {"id": call, "name": "run_ci",
                                                              "response": {"log": TEXT}}}]},
            {"role": "model", "parts": [{"text": TEXT}]},
        ]  # fmt: skip
    return [
        {"role": "user", "content": TEXT},
        {"role": "assistant", "content": [{"type": "tool_use", "id": call, "name": "run_ci",
                                           "input": {"job": "build"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call, "content": TEXT}]},
        {"role": "assistant", "content": [{"type": "text", "text": TEXT}]},
    ]  # fmt: skip


def insert_seconds(url: str, shape: str, turns: int) -> float:
    with ContextStore.from_url(url) as store:
        cid = store.create()
        started = time.perf_counter()
        for n in range(turns):
            for message in turn(shape, n):
                store.insert(cid, message)
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=2000)
    args = parser.parse_args()
    turns = args.messages // 4
    with tempfile.TemporaryDirectory() as tmp:
        for label, url in (("memory", "memory://"), ("SQLite", f"sqlite:///{Path(tmp) / 's.db'}")):
            chat = insert_seconds(url, "openai-chat", turns)
            for shape in ("openai-responses", "anthropic", "gemini"):
                other = insert_seconds(url, shape, turns)
                print(
                    f"{label}: inserting {turns * 4} {shape} messages one by one: "
                    f"{other / chat:.2f}x the chat messages' time ({other:.2f} s vs {chat:.2f} s)"
                )
    with ContextStore.from_url("memory://") as store:
        for shape in SHAPES:
            cid = store.create()
            store.insert(cid, [m for n in range(250) for m in turn(shape, n)])
            view = store.visible(cid)
            for target in SHAPES:
                started = time.perf_counter()
                for _ in range(5):
                    view.conversion(target)
                ms = (time.perf_counter() - started) / 5 * 1000
                print(f"1,000 {shape} messages to {target}: {ms:.1f} ms")


if __name__ == "__main__":
    main()
