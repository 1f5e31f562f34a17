"""What each route needs a token to carry: write, read, audit or admin.

- write: every command (create, insert, ..., streams, imports, uploads).
- read: what an SDK reads back from its contexts: the list, the visible context, prompts,
  batches, token series, model calls, a context's history, diff, replay and live tail,
  attachments.
- audit: everything read covers, and the tenant's audit trail: the audit log and its live
  feed, usage reports, erasure records, verification and exports. Never a write.
- admin: erasure, and (with tokens managed in the database) nothing else is needed to run
  the keys and retention commands, which are the command line's.

A contract operation's route needs the scope its declaration names (adapters/store/spec.py);
the routes beyond the contract are listed here. A route lists the scopes any one of which
admits a caller; one missing from this table is refused to every token (tests/service/test_scopes.py checks that the table covers every
route). A token configured as a bare tenant name has every scope (as before scopes).
"""

from __future__ import annotations

from ctxstore.adapters.store.contract import OPERATIONS
from ctxstore.adapters.store.spec import C
from ctxstore.domain.errors import CtxStoreError
from ctxstore.domain.scopes import ALL, SCOPES, parse_scopes

__all__ = ["ALL", "SCOPES", "ForbiddenError", "check", "needed", "parse_scopes"]
READ = frozenset({"read", "audit"})
AUDIT = frozenset({"audit"})
WRITE = frozenset({"write"})
ADMIN = frozenset({"admin"})

# What each scope of the spec admits (read covers audit's tokens too).
ADMITS = {"write": WRITE, "read": READ, "audit": AUDIT, "admin": ADMIN}
# The routes beyond the contract's operations: the web view's, retention's and the feeds'.
BEYOND_THE_CONTRACT: dict[tuple[str, str], frozenset[str]] = {
    ("GET", "/v1/contexts/overview"): READ,
    ("GET", f"{C}/shaped"): READ,
    ("GET", f"{C}/stored-events"): READ,
    ("GET", "/v1/events"): AUDIT,
    ("PUT", "/v1/retention"): ADMIN,
    ("GET", "/v1/retention"): ADMIN | AUDIT,
    ("GET", "/v1/retention/plan"): ADMIN | AUDIT,
    ("GET", "/v1/sweeps"): ADMIN | AUDIT,
}
ROUTE_SCOPES: dict[tuple[str, str], frozenset[str]] = {
    **{
        (op.method, op.path): ADMITS[op.scope]
        for op in OPERATIONS.values()
        if op.route and op.scope
    },
    **BEYOND_THE_CONTRACT,
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
