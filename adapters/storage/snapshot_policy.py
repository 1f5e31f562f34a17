"""When a context is snapshotted, and which older snapshots a new one makes redundant.

A snapshot costs time in proportion to the state it holds, so the step between snapshots
grows with that state (`step`): the cost per event stays bounded, and a cold head read
replays fewer events than the state holds messages.

A context that only grows leaves a ladder of snapshots (at 32, 64, 128, 256 ... events),
which together hold about twice what the newest holds. The older rungs buy little: a past
version between two kept snapshots replays from the earlier one, and when that span is at
most half as many events as the newest state holds messages, the replay costs about what
loading the newest snapshot costs. So, when a snapshot is stored, the one before it is
deleted if the span from the one before that (or the start) to the new one is at most
`held // 2` events (`superseded`). A context whose history outgrows its state (replaces,
deletes, compactions) keeps its snapshots: there the span exceeds the bound. Snapshots
are a cache of the events; deleting one never loses anything — except a bounded history's
origin (adapters/store/history_bound.py): the events before it are gone, so it is kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from ctxstore.adapters.storage.backend import Backend


def step(interval: int, held: int) -> int:
    """Events between snapshots of a context holding `held` messages (visible and saved
    by open batches): the configured interval, or a power of two in (held/4, held/2]."""
    return max(interval, 1 << (held // 4).bit_length())


def held_messages(ctx: Any) -> int:
    """What a snapshot of the context holds: its entries and its open batches' copies."""
    return len(ctx.entries) + sum(len(s["entries"]) for s in ctx.savepoints)


def superseded(
    version: int, held: int, older: Sequence[int], origin: int | None = None
) -> int | None:
    """The snapshot version that a new snapshot at `version`, holding `held` messages,
    makes redundant; `older` are the context's earlier snapshot versions, newest first;
    `origin` a bounded history's first snapshot, which nothing supersedes."""
    if not older or older[0] == origin:
        return None
    before = older[1] if len(older) > 1 else 0  # replays from there once older[0] goes
    return older[0] if version - before <= held // 2 else None


def prune_superseded(
    backend: Backend, snapshots: Any, cid: UUID, version: int, held: int,
    origin: int | None = None,
) -> int | None:  # fmt: skip
    """Delete the snapshot that a new one at `version` supersedes; returns its version
    (memory:// keeps every snapshot: its backend lists none)."""
    older = backend.snapshot_versions(snapshots, cid, below=version, limit=2)
    gone = superseded(version, held, older, origin)
    if gone is not None:
        backend.delete_snapshots(snapshots, cid, [gone])
    return gone
