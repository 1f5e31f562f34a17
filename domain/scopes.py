"""What a bearer token may do: write (commands), read (an SDK's reads of its contexts),
audit (every read and the tenant's audit trail; never a write), admin (erasure, retention,
keys). Which route needs which is the HTTP service's (adapters/http/scopes.py)."""

from __future__ import annotations

from collections.abc import Iterable

SCOPES = ("read", "write", "audit", "admin")
ALL = frozenset(SCOPES)


def parse_scopes(value: Iterable[str] | str) -> frozenset[str]:
    """Scopes as given (a list, or a comma-separated string); raises ValueError naming
    what is not a scope."""
    items = value.split(",") if isinstance(value, str) else list(value)
    found = frozenset(str(s).strip().lower() for s in items if str(s).strip())
    unknown = found - ALL
    if unknown or not found:
        named = ", ".join(sorted(unknown)) or "none"
        raise ValueError(f"scopes must be some of {', '.join(SCOPES)}; got {named}")
    return found
