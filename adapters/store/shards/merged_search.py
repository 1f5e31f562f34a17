"""A search over several servers: each server's best hits merged by score.

The merged cursor keeps, per server, the cursor its page started from and how many of that
page's hits earlier merged pages took, so the next merged page asks each server again from
there and skips what was shown: every hit once, in score order across servers.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping
from typing import Any, cast

from ctxstore.domain.errors import InvalidOperationError
from ctxstore.projections.search import SearchHit, SearchPage

DONE = "done"  # a server with no hits left
Searcher = Callable[[str | None, int], SearchPage]  # (its cursor, limit) -> its page


def merged_search(servers: Mapping[str, Searcher], limit: int, cursor: str | None) -> SearchPage:
    """The next `limit` hits across the servers, best first (ties by server, then order)."""
    state = _state(cursor, servers)
    pages: dict[str, tuple[SearchPage, int]] = {}
    for name, search in servers.items():
        at = state.get(name)
        if at == DONE:
            continue
        start, skip = at if isinstance(at, list) else (None, 0)
        pages[name] = (search(start, skip + limit), skip)
    ranked: list[tuple[float, str, int, SearchHit]] = []
    for name, (page, skip) in pages.items():
        ranked += [(-h.score, name, i, h) for i, h in enumerate(page.hits[skip:])]
    ranked.sort(key=lambda r: r[:3])
    chosen = ranked[:limit]
    taken = {name: sum(1 for r in chosen if r[1] == name) for name in pages}
    after: dict[str, Any] = dict(state)
    for name, (page, skip) in pages.items():
        used = skip + taken[name]
        start = state[name][0] if isinstance(state.get(name), list) else None
        if used < len(page.hits):
            after[name] = [start, used]
        elif page.cursor is not None:
            after[name] = [page.cursor, 0]
        else:
            after[name] = DONE
    left = any(v != DONE for v in after.values())
    return SearchPage(hits=[r[3] for r in chosen], cursor=_encoded(after) if left else None)


def _state(cursor: str | None, servers: Mapping[str, Searcher]) -> dict[str, Any]:
    if cursor is None:
        return {}
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        state = json.loads(text)
        ok = isinstance(state, dict) and set(state) <= set(servers) and all(
            v == DONE or (isinstance(v, list) and len(v) == 2 and isinstance(v[1], int))
            for v in state.values()
        )  # fmt: skip
    except (ValueError, TypeError, UnicodeDecodeError) as exc:
        raise InvalidOperationError(f"not a search cursor: {cursor!r:.60}") from exc
    if not ok:
        raise InvalidOperationError(f"not a search cursor of these servers: {cursor!r:.60}")
    return cast(dict[str, Any], state)


def _encoded(state: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(state).encode()).decode().rstrip("=")


__all__ = ["merged_search"]
