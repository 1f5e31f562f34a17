"""A realistic agent conversation for the peer benchmarks, and a fast loader of long histories.

`turns(n, seed)` yields agent turns as OpenAI messages: a user turn (English or Chinese, of
varied length), often a tool call and its result (results up to several KB), then the
assistant's answer. `session_commands(conversation)` sends those messages one at a time, as
an agent persists them, with batches kept or rolled back and compactions.
`build_history(store, events)` writes one context of `events` events shaped like a long agent
session — appends, batches rolled back or kept, compactions that keep the visible context
bounded — in bulk, with the snapshots the store's own policy would have taken, so read paths
can be timed at 100,000 events without 100,000 round trips.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any
from uuid import UUID

from ctxstore.adapters.llm.summarizers import ExtractiveSummarizer
from ctxstore.adapters.storage.codec.chain import GENESIS
from ctxstore.adapters.storage.snapshot_policy import (
    held_messages,
    step,
    superseded,
)
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.domain.context import Context

EN = [
    "the",
    "agent",
    "checked",
    "the",
    "order",
    "status",
    "and",
    "the",
    "shipping",
    "tool",
    "returned",
    "a",
    "tracking",
    "number",
    "with",
    "three",
    "pending",
    "scans",
    "while",
    "the",
    "customer",
    "asked",
    "about",
    "a",
    "refund",
    "for",
    "the",
    "late",
    "parcel",
]
ZH = "客户询问订单状态物流工具返回了追踪号码包裹延迟三天需要退款或者重新发货请确认地址"


def text(rng: random.Random, chars: int) -> str:
    if rng.random() < 0.3:
        return "".join(rng.choice(ZH) for _ in range(chars // 2))
    words: list[str] = []
    length = 0
    while length < chars:
        word = rng.choice(EN)
        words.append(word)
        length += len(word) + 1
    return " ".join(words)


def turn(rng: random.Random, n: int) -> list[dict[str, Any]]:
    """One agent turn: user, maybe a tool call and result, then the answer."""
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": text(rng, rng.choice([40, 120, 400, 1500]))}
    ]
    if rng.random() < 0.6:
        call = f"call_{n}"
        messages.append({
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": call, "type": "function", "function": {
                "name": rng.choice(["order_status", "search_docs", "refund"]),
                "arguments": f'{{"id": {n}, "q": "{text(rng, 30)}"}}'}}],
        })  # fmt: skip
        messages.append(
            {
                "role": "tool",
                "tool_call_id": call,
                "content": text(rng, rng.choice([200, 1200, 6000])),
            }
        )
    messages.append({"role": "assistant", "content": text(rng, rng.choice([80, 300, 900]))})
    return messages


def turns(count: int, seed: int = 7) -> Iterator[list[dict[str, Any]]]:
    rng = random.Random(seed)
    for n in range(count):
        yield turn(rng, n)


# ("insert", message), ("batch_start", None), ("batch_end", keep) or ("compact", None)
Command = tuple[str, Any]
COMPACT_EVERY = 50  # turns between compactions in an agent session

TEMPORARY = {"role": "developer", "content": "For this turn only: answer in one short paragraph."}


def session_commands(
    conversation: list[list[dict[str, Any]]], seed: int = 3, compact_every: int = COMPACT_EVERY
) -> Iterator[Command]:
    """The commands an agent persisting `conversation` sends, each message as it comes: one
    turn in seven under a temporary instruction in a batch, kept or rolled back (the turn
    with it) at the turn's end, as often; a compaction every `compact_every` turns."""
    rng = random.Random(seed)
    for n, messages in enumerate(conversation, start=1):
        batch = rng.random() < 1 / 7
        if batch:
            yield ("batch_start", None)
            yield ("insert", TEMPORARY)
        for m in messages:
            yield ("insert", m)
        if batch:
            yield ("batch_end", rng.random() < 0.5)
        if n % compact_every == 0:
            yield ("compact", None)


def run_command(store: ContextStore, cid: UUID, command: Command) -> int:
    """Run one session command; returns the context's version after it."""
    kind, arg = command
    if kind == "insert":
        return store.insert(cid, arg).version
    if kind == "batch_start":
        return store.batch_start(cid).version
    if kind == "batch_end":
        return store.batch_end(cid, keep=arg).version
    # The product's compaction (the older half of the rounds, at a turn boundary),
    # summarized offline: a batch_start and a compress, written together.
    done = store.compact(cid, summarizer=ExtractiveSummarizer())
    return done.version if done.version is not None else store.visible(cid).version


def build_history(store: ContextStore, events: int, seed: int = 11, calls: int = 0) -> UUID:
    """One context of about `events` events, written in bulk with policy snapshots; with
    `calls`, that many model calls recorded along the way (the whole context sent)."""
    rng = random.Random(seed)
    mapper = store._storage.mapper
    ctx = Context.start(name=f"history of {events}", metadata=None, actor="loader")
    counter = store.tokenizers.counter(ctx.encoding)
    snapshots: list[Any] = []
    kept: list[int] = []  # snapshot versions, oldest first
    stored_dropped: list[int] = []  # already stored, superseded since
    step_events: list[Any] = []
    prev, written, n = GENESIS, 0, 0
    while ctx.version < events:
        n += 1
        before = ctx.version
        roll = rng.random()
        if calls and n % max(1, events // calls) == 0:
            ctx.record_usage(
                for_version=ctx.version, model="gpt-4o", prompt_tokens=ctx.tokens,
                completion_tokens=rng.randint(20, 400), counted_tokens=ctx.tokens,
                estimated=False, actor="agent", latency=rng.uniform(0.3, 4.0),
            )  # fmt: skip
        elif roll < 0.08 and ctx.savepoints:
            ctx.batch_end(keep=rng.random() < 0.5, actor="agent")
        elif roll < 0.14:
            ctx.batch_start(actor="agent")
        elif len(ctx.order) > 120:  # keep the window bounded, as compaction does
            ids = list(ctx.order[: len(ctx.order) // 2])
            # Whole tool blocks only: end the run before a tool result.
            while ids and ctx.entries[ctx.order[len(ids)]]["message"]["role"] == "tool":
                ids.pop()
            ctx.compress(ids, {"role": "user", "content": text(rng, 300),
                               "metadata": {"ctxstore": "summary"}},
                         actor="compactor", counter=counter)  # fmt: skip
        else:
            ctx.insert(turn(rng, n), actor="agent", counter=counter)
        held = held_messages(ctx)
        every = step(store.settings.snapshot_interval, held)
        if ctx.version // every > before // every and store._storage.snapshots is not None:
            # Serialized now: the aggregate's nested state changes with the next command.
            snapshot = Context.Snapshot.take(ctx)
            dropped = superseded(ctx.version, held, kept[::-1][:2])
            if dropped is not None:  # deleted, as the store's policy deletes it
                kept.remove(dropped)
                if any(x.originator_version == dropped for x in snapshots):
                    snapshots = [x for x in snapshots if x.originator_version != dropped]
                else:
                    stored_dropped.append(dropped)
            kept.append(ctx.version)
            snapshots.append(store._storage.snapshots.stored(snapshot))
        step_events += ctx.collect_events()
        if len(step_events) >= 5000 or ctx.version >= events:
            sealed, prev = mapper.to_sealed_events(step_events, prev)
            store._storage.recorder.insert_events(sealed)
            written += len(sealed)
            step_events = []
            if snapshots and store._storage.snapshots is not None:
                store._storage.snapshots.recorder.insert_events(snapshots)
                snapshots = []
            if stored_dropped and store._storage.snapshots is not None:
                store._storage.backend.delete_snapshots(
                    store._storage.snapshots.recorder, ctx.id, stored_dropped
                )
                stored_dropped = []
    assert written == ctx.version
    return ctx.id
