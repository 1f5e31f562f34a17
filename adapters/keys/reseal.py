"""Sealing stored states anew with their context's current data key.

Two uses: `ctxstore encrypt` seals a store written without encryption (or with the one
store-wide key of earlier releases) in place, and re-keying a context seals its states
under a new generation of its key. Rows are replaced in batches, each in a transaction of
its own and each row only if it still holds what was read, so the work is safe to
interrupt (a killed run leaves every row readable, old or new) and to run again (it selects
only rows not yet under the current key). Events never change otherwise, so nothing races
it but another resealing; the hash chain covers the plaintext, so `verify` still holds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict

from ctxstore.adapters.keys.cipher import MAGIC, ContextCipher, key_name

BATCH = 500


class Resealing(BaseModel):
    """What a resealing did."""

    model_config = ConfigDict(frozen=True)

    contexts: int
    events: int  # rows sealed anew
    snapshots: int
    attachments: int = 0  # put under keys of their own (encrypting in place)
    seconds: float
    residue: list[str] = []  # where the replaced states may still be (the backend says)


def reseal(
    storage: Any,
    cipher: ContextCipher,
    contexts: Iterable[UUID],
    *,
    batch: int = BATCH,
    progress: Callable[[int], None] | None = None,
    scrub: bool = True,
) -> Resealing:
    """Seal every state of `contexts` with its current key generation."""
    start = time.perf_counter()
    backend = storage.backend
    counts = {"events": 0, "snapshots": 0, "contexts": 0}
    for cid in contexts:
        gen, _ = cipher.keys.current(key_name(cid))
        prefix = MAGIC + gen.to_bytes(4, "big")
        for kind, recorder in (
            ("events", storage.recorder),
            ("snapshots", storage.snapshots.recorder),
        ):
            while rows := backend.unsealed_rows(recorder, cid, prefix, batch):
                fresh = [(v, old, cipher.encrypt(cid, cipher.decrypt(cid, old))) for v, old in rows]
                counts[kind] += backend.reseal_rows(recorder, cid, fresh)
        storage.blobs.reseal_refs(cid)  # its wrappings of attachment keys
        counts["contexts"] += 1
        if progress is not None:
            progress(counts["contexts"])
    residue: list[str] = []
    if scrub and (counts["events"] or counts["snapshots"]):
        residue = backend.scrub(storage.recorder)
    return Resealing(**counts, seconds=time.perf_counter() - start, residue=residue)


def rekey(
    storage: Any, cipher: ContextCipher, cid: UUID, *, wait: float | None = None,
    waiting: Callable[[float, float], None] | None = None,
) -> Resealing:  # fmt: skip
    """A new generation of the context's data key; its states sealed with it; the old
    generations dropped once every process's cache has had time to learn of the new one
    (`wait`, default the cache's TTL), with the states written meanwhile sealed again.
    `waiting(seconds waited, seconds to wait)` is told about once a second meanwhile."""
    keys = cipher.keys
    name = key_name(cid)
    gens = keys.generations(name)
    new = max(gens, default=0) + 1
    keys.add(name, new)
    first = reseal(storage, cipher, [cid], scrub=False)
    pause = keys.ttl if wait is None else wait
    start = time.monotonic()
    while (waited := time.monotonic() - start) < pause:
        if waiting is not None:
            waiting(waited, pause)
        time.sleep(min(1.0, pause - waited))
    if waiting is not None:
        waiting(pause, pause)
    second = reseal(storage, cipher, [cid], scrub=False)
    keys.vault.drop_generations(name, new)
    keys.forget([name])
    residue = storage.backend.scrub(storage.recorder)
    return Resealing(
        contexts=1, events=first.events + second.events,
        snapshots=first.snapshots + second.snapshots,
        seconds=first.seconds + second.seconds, residue=residue,
    )  # fmt: skip
