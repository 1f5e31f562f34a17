"""Rotating the key-encryption key: every data key re-wrapped under the current KEK.

Online and resumable: batches of rows are re-wrapped, each in a transaction of its own that
replaces a row only if it still holds the wrapping read (a row another process re-wrapped,
or an erasure destroyed, meanwhile is left alone). Data keys do not change, so no event is
touched and writers never wait: they read the vault only for contexts not in their cache,
and either wrapping of a row opens while both KEKs are held. Running it again after an
interruption continues where it stopped (what is done no longer matches). When no row
is wrapped by an old KEK, that KEK can be removed from the key file (or the KMS).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict

from ctxstore.adapters.keys.cipher import DataKeys
from ctxstore.adapters.keys.kek import KeyUnavailableError

BATCH = 2000


class KekRotation(BaseModel):
    """What a rotation did: rows re-wrapped, rows it could not open, per-KEK counts after."""

    model_config = ConfigDict(frozen=True)

    kek: str  # the current KEK, which now wraps every row it could open
    rewrapped: int
    unopened: list[str]  # names whose wrapping no held KEK opens (a KEK missing from the file)
    seconds: float
    by_kek: dict[str, int]

    @property
    def done(self) -> bool:
        return set(self.by_kek) <= {self.kek}


def rotate_kek(
    keys: DataKeys,
    *,
    batch: int = BATCH,
    max_batches: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> KekRotation:
    """Re-wrap every data key not wrapped by the current KEK (`max_batches`: stop early, as
    an interrupted run would)."""
    start = time.perf_counter()
    current = keys.kek.current_id
    after: tuple[str, int] = ("", 0)
    done, batches = 0, 0
    unopened: list[str] = []
    while max_batches is None or batches < max_batches:
        rows = keys.vault.not_wrapped_by(current, after, batch)
        if not rows:
            break
        pairs = []
        for row in rows:
            try:
                pairs.append((row, keys.rewrap(row)))
            except KeyUnavailableError:
                unopened.append(row[0])
        done += keys.vault.rewrap(pairs)
        after = rows[-1][:2]
        batches += 1
        if progress is not None:
            progress(done)
    return KekRotation(
        kek=current, rewrapped=done, unopened=unopened,
        seconds=time.perf_counter() - start, by_kek=keys.vault.kek_counts(),
    )  # fmt: skip
