"""Tables of retention (adapters/store/retention.py): policies per tenant or context, the
sweeps that applied them, and the signed checkpoints that re-anchor a bounded history."""

from __future__ import annotations

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
