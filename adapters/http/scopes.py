"""What each route needs a token to carry: write, read, audit or admin.

- write: every command (create, insert, ..., streams, imports, uploads).
- read: what an SDK reads back from its contexts: the list, the visible context, prompts,
  batches, token series, model calls, a context's history, diff, replay and live tail,
  attachments.
- audit: everything read covers, and the tenant's audit trail: the audit log and its live
  feed, usage reports, erasure records, verification and exports. Never a write.
- admin: erasure, and (with tokens managed in the database) nothing else is needed to run
  the keys and retention commands, which are the command line's.

A route lists the scopes any one of which admits a caller; one missing from this table is
refused to every token (tests/service/test_scopes.py checks that the table covers every
route). A token configured as a bare tenant name has every scope (as before scopes).
"""

from __future__ import annotations

from ctxstore.domain.errors import CtxStoreError
from ctxstore.domain.scopes import ALL, SCOPES, parse_scopes

__all__ = ["ALL", "SCOPES", "ForbiddenError", "check", "needed", "parse_scopes"]
READ = frozenset({"read", "audit"})
AUDIT = frozenset({"audit"})
WRITE = frozenset({"write"})
ADMIN = frozenset({"admin"})

C = "/v1/contexts/{context_id}"
COMMANDS = (
    "insert", "delete", "replace", "compress", "expand", "batch-start", "batch-end", "usage",
    "responses", "compact", "begin", "append", "finish", "abandon",
)  # fmt: skip
ROUTE_SCOPES: dict[tuple[str, str], frozenset[str]] = {
    ("POST", "/v1/contexts"): WRITE,
    ("GET", "/v1/contexts"): READ,
    ("POST", "/v1/contexts/by-key"): WRITE,
    ("GET", "/v1/contexts/by-key"): READ,
    ("GET", "/v1/contexts/overview"): READ,
    ("GET", C): READ,
    ("DELETE", C): ADMIN,
    ("POST", f"{C}/fork"): WRITE,
    **{("POST", f"{C}/{name}"): WRITE for name in COMMANDS},
    ("POST", f"{C}/calls"): WRITE,
    ("GET", f"{C}/history"): READ,
    ("GET", f"{C}/batches"): READ,
    ("GET", f"{C}/diff"): READ,
    ("GET", f"{C}/tokens"): READ,
    ("POST", f"{C}/prompt"): READ,
    ("GET", f"{C}/calls"): READ,
    ("GET", f"{C}/calls/{{number}}"): READ,
    ("GET", f"{C}/calls/{{number}}/diff"): READ,
    ("GET", f"{C}/shaped"): READ,
    ("GET", f"{C}/stored-events"): READ,
    ("GET", f"{C}/replay"): READ,
    ("GET", f"{C}/events"): READ,
    ("GET", f"{C}/verify"): AUDIT,
    ("GET", f"{C}/export"): AUDIT,
    ("POST", "/v1/contexts/import"): WRITE,
    ("POST", "/v1/contexts/import-transcript"): WRITE,
    ("GET", "/v1/audit"): AUDIT,
    ("GET", "/v1/events"): AUDIT,
    ("GET", "/v1/usage"): AUDIT,
    ("GET", "/v1/erasures"): AUDIT,
    ("POST", "/v1/blobs"): WRITE,
    ("GET", "/v1/blobs/{sha256}"): READ,
    ("POST", "/v1/blobs/{sha256}/file-ids"): WRITE,
    ("PUT", "/v1/retention"): ADMIN,
    ("GET", "/v1/retention"): ADMIN | AUDIT,
    ("GET", "/v1/retention/plan"): ADMIN | AUDIT,
    ("GET", "/v1/sweeps"): ADMIN | AUDIT,
}


class ForbiddenError(CtxStoreError):
    """The token is valid but lacks the scope the route needs (HTTP 403)."""


def needed(method: str, path: str) -> frozenset[str]:
    """The scopes admitting a route (empty: none does)."""
    return ROUTE_SCOPES.get((method.upper(), path), frozenset())


def check(granted: frozenset[str], method: str, path: str) -> None:
    """Raise ForbiddenError unless one of the granted scopes admits the route."""
    admits = needed(method, path)
    if not granted & admits:
        wanted = " or ".join(sorted(admits)) or "a scope no token has"
        raise ForbiddenError(
            f"this token may not {method.upper()} {path}: it needs {wanted} "
            f"(it has {', '.join(sorted(granted)) or 'none'})"
        )
