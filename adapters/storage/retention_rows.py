"""Tables of retention (adapters/store/retention.py): policies per tenant or context, the
sweeps that applied them, and the signed checkpoints that re-anchor a bounded history."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, NamedTuple

from ctxstore.adapters.storage.tokens import DDL as TOKENS_DDL
from ctxstore.adapters.storage.tokens import TABLE as TOKENS_TABLE

RETENTION_TABLE = "ctxstore_retention"
SWEEPS_TABLE = "ctxstore_sweeps"
CHECKPOINTS_TABLE = "ctxstore_checkpoints"

# scope: "tenant:<name>" ('' for contexts without one) or "context:<32 hex digits>".
RETENTION_DDL = (
    "CREATE TABLE IF NOT EXISTS {t} (scope TEXT PRIMARY KEY, expire_after DOUBLE PRECISION, "
    "keep_latest INTEGER, set_at DOUBLE PRECISION NOT NULL, actor TEXT NOT NULL)"
)
SWEEPS_DDL = (
    "CREATE TABLE IF NOT EXISTS {t} (id TEXT PRIMARY KEY, started DOUBLE PRECISION NOT NULL, "
    "finished DOUBLE PRECISION NOT NULL, actor TEXT NOT NULL, expired INTEGER NOT NULL, "
    "trimmed INTEGER NOT NULL, events_removed INTEGER NOT NULL, details TEXT NOT NULL)"
)
# The origin of a context whose older history was removed: the version its stored events
# now start after, that version's chain, and a signature over both (HMAC, store key).
CHECKPOINTS_DDL = (
    "CREATE TABLE IF NOT EXISTS {t} (context_id TEXT PRIMARY KEY, version INTEGER NOT NULL, "
    "chain TEXT NOT NULL, removed_at DOUBLE PRECISION NOT NULL, keep_latest INTEGER NOT NULL, "
    "signature TEXT NOT NULL)"
)


def lifecycle_tables() -> list[tuple[str, str]]:
    """(table, its DDL with `{t}` for the table's name) of tokens, retention policies, sweeps
    and checkpoints: what each backend's migration creates."""
    return [
        (TOKENS_TABLE, TOKENS_DDL), (RETENTION_TABLE, RETENTION_DDL),
        (SWEEPS_TABLE, SWEEPS_DDL), (CHECKPOINTS_TABLE, CHECKPOINTS_DDL),
    ]  # fmt: skip


class RetentionRows:
    """Policies, sweep records and checkpoints in the store's database, in the backend's
    placeholders."""

    def __init__(
        self, run: Callable[[str, tuple[Any, ...]], list[tuple[Any, ...]]], prefix: str, mark: str
    ) -> None:
        self._run = run
        self._prefix = prefix  # the schema's qualifier ('' on SQLite)
        self._mark = mark

    def _sql(self, text: str) -> str:
        return text.format(
            policies=self._prefix + RETENTION_TABLE, sweeps=self._prefix + SWEEPS_TABLE,
            checkpoints=self._prefix + CHECKPOINTS_TABLE, m=self._mark,
        )  # fmt: skip

    def set(
        self, scope: str, expire_after: float | None, keep_latest: int | None, actor: str
    ) -> None:
        if expire_after is None and keep_latest is None:
            self._run(self._sql("DELETE FROM {policies} WHERE scope = {m}"), (scope,))
            return
        self._run(
            self._sql(
                "INSERT INTO {policies} (scope, expire_after, keep_latest, set_at, actor) "
                "VALUES ({m}, {m}, {m}, {m}, {m}) ON CONFLICT (scope) DO UPDATE SET "
                "expire_after = excluded.expire_after, keep_latest = excluded.keep_latest, "
                "set_at = excluded.set_at, actor = excluded.actor"
            ),
            (scope, expire_after, keep_latest, time.time(), actor),
        )

    def policies(self) -> list[tuple[str, float | None, int | None, float, str]]:
        """(scope, expire_after, keep_latest, set_at, actor) of every policy."""
        rows = self._run(
            self._sql(
                "SELECT scope, expire_after, keep_latest, set_at, actor FROM {policies} "
                "ORDER BY scope"
            ),
            (),
        )
        return [
            (r[0], None if r[1] is None else float(r[1]), None if r[2] is None else int(r[2]),
             float(r[3]), r[4])
            for r in rows
        ]  # fmt: skip

    def checkpoints(self, context_hex: str | None = None) -> dict[str, Checkpoint]:
        """The checkpoints of every context (or of one), by context hex."""
        where, params = ("WHERE context_id = {m}", (context_hex,)) if context_hex else ("", ())
        rows = self._run(
            self._sql(
                "SELECT context_id, version, chain, removed_at, keep_latest, signature "
                "FROM {checkpoints} " + where
            ),
            params,
        )
        return {r[0]: Checkpoint(int(r[1]), r[2], float(r[3]), int(r[4]), r[5]) for r in rows}

    def set_checkpoint(self, context_hex: str, checkpoint: Checkpoint) -> None:
        """Record a context's checkpoint, or move it forward (never back)."""
        c = checkpoint
        self._run(
            self._sql(
                "INSERT INTO {checkpoints} (context_id, version, chain, removed_at, keep_latest, "
                "signature) VALUES ({m}, {m}, {m}, {m}, {m}, {m}) ON CONFLICT (context_id) DO "
                "UPDATE SET version = excluded.version, chain = excluded.chain, "
                "removed_at = excluded.removed_at, keep_latest = excluded.keep_latest, "
                "signature = excluded.signature WHERE excluded.version > {checkpoints}.version"
            ),
            (context_hex, c.version, c.chain, c.removed_at, c.keep_latest, c.signature),
        )

    def drop_checkpoint(self, context_hex: str) -> None:
        """Forget a context's checkpoint (the context was erased)."""
        self._run(self._sql("DELETE FROM {checkpoints} WHERE context_id = {m}"), (context_hex,))

    def record_sweep(self, sweep_id: str, started: float, finished: float, actor: str,
                     expired: int, trimmed: int, removed: int, details: str) -> None:  # fmt: skip
        self._run(
            self._sql(
                "INSERT INTO {sweeps} (id, started, finished, actor, expired, trimmed, "
                "events_removed, details) VALUES ({m}, {m}, {m}, {m}, {m}, {m}, {m}, {m})"
            ),
            (sweep_id, started, finished, actor, expired, trimmed, removed, details),
        )

    def sweeps(self, limit: int) -> list[tuple[Any, ...]]:
        """(id, started, finished, actor, expired, details), newest first."""
        return self._run(
            self._sql(
                "SELECT id, started, finished, actor, expired, details FROM {sweeps} "
                "ORDER BY started DESC LIMIT {m}"
            ),
            (limit,),
        )


class Checkpoint(NamedTuple):
    """Where a bounded context's stored history starts: after `version`, whose chain it
    gives, signed (HMAC under the store's checkpoint key, or a plain hash without keys)."""

    version: int
    chain: str
    removed_at: float
    keep_latest: int
    signature: str
