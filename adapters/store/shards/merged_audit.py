"""The audit across shards: each server's audit stream read after its own position, merged
by time, with one cursor holding a position per server.

Each server's positions only grow (postgres_audit.py), so a cursor that records, per
server, the last position taken sees every event of every server exactly once, whatever
order the servers' events interleave in. A page takes up to `limit`
entries after the cursor from each server, merges them by time keeping each server's own
order, and keeps the first `limit`; the cursor advances only past what the page returned.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from datetime import datetime

from ctxstore.domain.errors import InvalidOperationError
from ctxstore.projections.audit import AuditEntry, AuditPage

PREFIX = "s1:"  # the cursor's format


class MergedAuditPage(AuditPage):
    """A page of the merged audit: entries from every server, the server each came from,
    and the cursor to go on (text)."""

    shards: list[str]


def parse_cursor(after: str | int, names: list[str]) -> dict[str, int]:
    """Per-server positions from a merged cursor ('' or 0: the start)."""
    start = dict.fromkeys(names, 0)
    if after in ("", 0, None):
        return start
    if not isinstance(after, str) or not after.startswith(PREFIX):
        raise InvalidOperationError(f"after must be a cursor of the merged audit, got {after!r}")
    for part in filter(None, after[len(PREFIX) :].split(",")):
        name, _, position = part.partition("=")
        if name not in start or not position.isdigit():
            raise InvalidOperationError(f"after names an unknown server or position: {part!r}")
        start[name] = int(position)
    return start


def format_cursor(positions: dict[str, int]) -> str:
    return PREFIX + ",".join(f"{n}={p}" for n, p in sorted(positions.items()))


def entry_cursors(after: str | int, page: MergedAuditPage, names: list[str]) -> list[str]:
    """The cursor after each entry of a page read after `after`: where a reader that
    stopped at that entry goes on (a live tail's event ids)."""
    positions = parse_cursor(after, names)
    found = []
    for entry, name in zip(page.entries, page.shards, strict=True):
        positions[name] = entry.position
        found.append(format_cursor(positions))
    return found


def merged_page(
    read: Callable[[str, int, int], AuditPage], names: list[str], after: str | int, limit: int,
    copied: Callable[[str, AuditEntry], bool] | None = None,
) -> MergedAuditPage:  # fmt: skip
    """`read(server, after, limit)` on each server, merged into one page. An entry for
    which `copied(server, entry)` holds (a moved context's event shown on a server it
    left: arrivals.py) is passed over, not returned."""
    positions = parse_cursor(after, names)
    pages: list[list[tuple[datetime, int, int, str, AuditEntry]]] = []
    more = False
    for i, name in enumerate(names):
        page = read(name, positions[name], limit)
        more = more or page.more
        pages.append([(e.timestamp, i, e.position, name, e) for e in page.entries])
    # A k-way merge by time keeps each server's own order (a later position may carry an
    # earlier time), so what a page takes from a server is a prefix of its page: the
    # cursor passes exactly what was returned.
    merged = list(heapq.merge(*pages, key=lambda f: (f[0], f[1])))
    taken: list[tuple[datetime, int, int, str, AuditEntry]] = []
    left = False
    for found in merged:
        _, _, position, name, entry = found
        if copied is None or not copied(name, entry):
            if len(taken) == limit:
                left = True
                break
            taken.append(found)
        positions[name] = position
    return MergedAuditPage(
        entries=[f[4] for f in taken],
        shards=[f[3] for f in taken],
        cursor=format_cursor(positions),
        more=more or left,
    )
