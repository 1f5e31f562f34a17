"""Bounding a context's history: retention's `keep_latest`.

A context whose policy keeps its latest N events loses the older ones, all but its creation
event (version 1, which names it and its tenant): versions 2..S, with S = head - N at the
time. Before anything is removed, the context's state at S is stored as a snapshot holding
every message itself (no longer pointing at the events that carried them) and a
checkpoint is recorded: S, the hash chain's value at S, and a signature over both (HMAC
under a store key from the vault when the store has keys; a plain hash otherwise, which
proves as much as the unkeyed chain does). Then the events, the snapshots before S and the
audit rows of those versions are deleted.

After that: reading the context, and time travel to S or later, start from the snapshot;
time travel to 2..S-1 raises HistoryRemovedError; history, diff, replay and the other folds
see the creation event, then one `HistoryRemoved` step at S that restores the state as it
was there, then the kept events; `verify` checks the creation event from the genesis, the
checkpoint's signature, and the kept events from the checkpoint's chain. A run interrupted
anywhere is completed by the next (the checkpoint only moves forward, deletion is
idempotent).
"""

from __future__ import annotations

import hashlib
import hmac
import threading
import time
from typing import TYPE_CHECKING
from uuid import UUID

from ctxstore.adapters.storage.codec.chain import anchor, unseal
from ctxstore.adapters.storage.retention_rows import Checkpoint
from ctxstore.adapters.storage.snapshot_store import map_entries
from ctxstore.adapters.store.retention import REFRESH  # a "no checkpoint" is trusted as long
from ctxstore.domain.context import JSON, Context
from ctxstore.domain.errors import HistoryRemovedError

if TYPE_CHECKING:
    from ctxstore.adapters.store.core import StoreCore

SIGNING_KEY = "store:checkpoint"
ACTOR = "ctxstore:retention"


class Bounds:
    """One store's checkpoints, cached; the trims that make them."""

    def __init__(self, core: StoreCore) -> None:
        self.core = core
        self._known: dict[str, tuple[float, Checkpoint | None]] = {}
        self._lock = threading.Lock()

    def of(self, cid: UUID, *, fresh: bool = False) -> Checkpoint | None:
        rows = self.core.storage.retention
        if rows is None:
            return None
        now = time.monotonic()
        with self._lock:
            hit = self._known.get(cid.hex)
        if hit is not None and not fresh and (hit[1] is not None or now - hit[0] < REFRESH):
            return hit[1]
        found = rows.checkpoints(cid.hex).get(cid.hex)
        with self._lock:
            if len(self._known) > 100_000:
                self._known.clear()
            self._known[cid.hex] = (now, found)
        return found

    def forget(self, cid: UUID) -> None:
        with self._lock:
            self._known.pop(cid.hex, None)

    def check_version(self, cid: UUID, version: int) -> None:
        """Raise HistoryRemovedError for a version retention removed."""
        cp = self.of(cid)
        if cp is not None and 1 < version < cp.version:
            raise HistoryRemovedError(
                f"context {cid}: versions 2..{cp.version - 1} were removed by retention "
                f"(keep_latest {cp.keep_latest}); it can be read at version 1 and from "
                f"version {cp.version} on"
            )

    def signature(self, cid: UUID, version: int, chain: str) -> str:
        body = f"ctxstore checkpoint\n{cid.hex}\n{version}\n{chain}".encode()
        keys = self.core.storage.keys
        if keys is None:
            return "sha256:" + hashlib.sha256(body).hexdigest()
        _, key = keys.keys.current(SIGNING_KEY)
        return "hmac-sha256:" + hmac.new(key, body, hashlib.sha256).hexdigest()

    def valid(self, cid: UUID, cp: Checkpoint) -> bool:
        return hmac.compare_digest(self.signature(cid, cp.version, cp.chain), cp.signature)

    def removed_event(self, cid: UUID, cp: Checkpoint) -> Context.HistoryRemoved:
        """The fold's stand-in for the removed versions: the state at the checkpoint."""
        found = list(self.core.storage.snapshots.get(cid, lte=cp.version, desc=True, limit=1))
        if not found or found[0].originator_version != cp.version:
            raise HistoryRemovedError(
                f"context {cid}: the snapshot at its checkpoint (version {cp.version}) is missing"
            )
        snapshot = found[0]
        state: JSON = snapshot.state
        event = object.__new__(Context.HistoryRemoved)
        object.__setattr__(event, "__dict__", {
            "originator_id": cid, "originator_version": cp.version,
            "timestamp": snapshot.timestamp, "state": state, "keep_latest": cp.keep_latest,
            "actor": ACTOR, "batch": int(state.get("batch", 0) or 0),
        })  # fmt: skip
        return event

    def trim(self, cid: UUID, keep_latest: int) -> int:
        """Remove the context's events older than its latest `keep_latest` (see the
        module); the events removed."""
        storage = self.core.storage
        rows = storage.retention
        if rows is None:
            return 0
        head = storage.get(cid)
        bound = head.version - keep_latest
        cp = self.of(cid, fresh=True)
        if cp is None or cp.version < bound:
            if bound < 2:
                return 0
            self._store_origin(cid, bound)
            chain = self._chain_at(cid, bound)
            cp = Checkpoint(
                bound, chain, time.time(), keep_latest, self.signature(cid, bound, chain)
            )
            rows.set_checkpoint(cid.hex, cp)
            self.forget(cid)
        removed = storage.backend.remove_history(storage, cid, cp.version)
        # Cached copies hold entries that name removed events: read it again from the origin.
        self.core.forget(cid)
        return removed

    def _store_origin(self, cid: UUID, version: int) -> None:
        """A snapshot at `version` that holds every message itself."""
        storage = self.core.storage
        at = storage.get(cid, version=version)
        snapshot = Context.Snapshot.take(at)
        state = _all_inline(snapshot.state)
        whole = type(snapshot)(
            originator_id=snapshot.originator_id, originator_version=snapshot.originator_version,
            timestamp=snapshot.timestamp, topic=snapshot.topic, state=state,
        )  # fmt: skip
        storage.backend.delete_snapshots(storage.snapshots.recorder, cid, [version])
        storage.snapshots.put([whole])

    def _chain_at(self, cid: UUID, version: int) -> str:
        storage = self.core.storage
        found = storage.recorder.select_events(cid, gt=version - 1, lte=version, limit=1)
        plain = storage.mapper.plaintext(found[0].state, cid)
        chain = unseal(plain)[1]
        return anchor(plain) if chain is None else chain


def _all_inline(state: JSON) -> JSON:
    """A snapshot state whose every entry (the head's and each open batch's) keeps its
    message: no event will be there to carry it."""
    return map_entries(state, lambda _, entry: {**entry, "inline": True})
