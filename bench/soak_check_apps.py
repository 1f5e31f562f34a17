"""What the soak checks of the processes beside its writers (soak_apps.py), per store, once
everything has stopped:

- capture: each call's mark against the calls the store recorded (every context's usage
  events): captured at most once; every call the provider received is captured when its
  process ended normally with nothing dropped or given up; none captured that was not made.
- search against a rebuild: for marks the writers and the capture acknowledged, the hits
  (context, message) of the index as the run left it, of a scan of every context's visible
  messages (what the index must find), and of the index rebuilt from the events
  (`admin.reindex()`), visible and hidden alike; any difference counts.
- the worker, the searcher and the MCP client: their calls by outcome; anything that was
  not a typed refusal is an untyped error.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from pathlib import Path
from typing import Any

MARK = re.compile(r"[A-Za-z0-9-]+\.\d+\.\d+")  # name.pid.n (soak.py, soak_apps.py)
QUERIES = 300  # marks searched per store at the end


def journal_notes(path: Path) -> list[dict[str, Any]]:
    notes = []
    for line in path.read_text().splitlines():
        try:
            notes.append(json.loads(line))
        except ValueError:  # a process killed mid-line leaves half of one
            continue
    return notes


def of_store(apps: Path, on: str) -> dict[str, list[dict[str, Any]]]:
    """The journals of the processes on store `on` (pg or sqlite), by name."""
    suffix = "-lite" if on == "sqlite" else "-pg"
    return {p.stem: journal_notes(p) for p in sorted(apps.glob("*.jsonl"))
            if p.stem.endswith(suffix)}  # fmt: skip


def _tokens(mark: str) -> str:
    return " ".join(re.findall(r"\w+", mark.lower()))


def check_capture(found: dict[str, Any], journals: dict[str, list[dict[str, Any]]],
                  calls: Counter[str]) -> None:  # fmt: skip
    """`calls`: every recorded call's request as JSON text."""
    recorded = Counter(m for text, n in calls.items() for m in MARK.findall(text) for _ in range(n))
    c = found["capture"]
    for name, notes in journals.items():
        if not name.startswith(("agents-", "otel-")):
            continue
        last: dict[str, dict[str, Any]] = {}
        ended: dict[int, dict[str, Any]] = {}  # pid: the stats of a process that ended
        for n in notes:
            if n["kind"] == "stats":
                ended[int(n["pid"])] = n
            else:
                last[n["mark"]] = n
        for stats in ended.values():
            for what in ("submitted", "recorded", "dropped", "failed"):
                c[f"recorder {what}"] += stats[what]
        for mark, n in last.items():
            made = n.get("made")  # None: killed before the outcome (made or not)
            k = recorded[mark]
            c["calls made"] += made or 0
            c["calls captured"] += k
            c["unknown (killed)"] += made is None
            if k > (1 if made is None else max(made, 1)):
                c["doubled"] += 1
                found.setdefault("examples", []).append({**n, "captured": k})
            elif made == 0 and k:
                c["captured but not made"] += 1
            elif made and not k:
                got = ended.get(int(mark.split(".")[1]))
                whole = got is not None and got["flushed"] and not (got["dropped"] or got["failed"])
                c["lost" if whole else "not captured (killed or given up)"] += 1
                if whole:
                    found.setdefault("examples", []).append({**n, "captured": 0})


def _hits(store: Any, query: str, hidden: bool) -> set[tuple[str, str]]:
    got: set[tuple[str, str]] = set()
    cursor = None
    while True:
        page = store.search(query, include_hidden=hidden, limit=100, cursor=cursor)
        got.update((str(h.context_id), h.message_id) for h in page.hits)
        cursor = page.cursor
        if cursor is None:
            return got


def check_search(found: dict[str, Any], store: Any, marks: list[str],
                 shown: dict[str, set[tuple[str, str]]]) -> None:  # fmt: skip
    """`shown`: each mark's (context, message) pairs among the visible messages."""
    queries = random.Random(3).sample(marks, min(QUERIES, len(marks)))
    s = found["search"]
    s["queries"] += len(queries)
    keys = [(q, h) for q in queries for h in (False, True)]
    try:
        index: dict[tuple[str, bool], set[tuple[str, str]]] | None = {
            (q, h): _hits(store, f'"{q}"', h) for q, h in keys
        }
    except Exception as exc:  # noqa: BLE001 - the index as the run left it is unusable
        index = None
        found["check failed"].append(f"search before the rebuild: {exc!r}"[:300])
    try:
        store.admin.reindex()
        rebuilt = {(q, h): _hits(store, f'"{q}"', h) for q, h in keys}
    except Exception as exc:  # noqa: BLE001
        found["check failed"].append(f"search after the rebuild: {exc!r}"[:300])
        return
    for (q, hidden), hits in rebuilt.items():
        s["hits"] += len(hits)
        if not hidden and hits != shown.get(_tokens(q), set()):
            s["rebuild vs visible messages differ"] += 1
        if index is None:
            continue
        if index[q, hidden] != hits:
            s["index vs rebuild differ"] += 1
            found.setdefault("examples", []).append(
                {"query": q, "hidden": hidden, "index only": sorted(index[q, hidden] - hits)[:3],
                 "rebuild only": sorted(hits - index[q, hidden])[:3]})  # fmt: skip
        if not hidden and index[q, hidden] != shown.get(_tokens(q), set()):
            s["index vs visible messages differ"] += 1
            found.setdefault("examples", []).append(
                {"query": q, "index": sorted(index[q, hidden])[:3],
                 "visible": sorted(shown.get(_tokens(q), set()))[:3]})  # fmt: skip


def shown_marks(store: Any, cid: str, into: dict[str, set[tuple[str, str]]]) -> None:
    """Each mark in a context's visible messages: where it is shown."""
    from ctxstore.domain.errors import ContextNotFoundError

    try:
        messages = store.visible(cid).messages
    except ContextNotFoundError:  # (erased)
        return
    for m in messages:
        for mark in MARK.findall(json.dumps(m.model_dump(mode="json"))):
            into[_tokens(mark)].add((cid, m.id))


def tally(found: dict[str, Any], journals: dict[str, list[dict[str, Any]]]) -> None:
    """The worker's, the searcher's and the MCP client's calls by outcome."""
    for name, notes in journals.items():
        role = name.split("-")[0]
        if role not in ("work", "search", "mcp"):
            continue
        for n in notes:
            if n.get("ok") == "pending":
                continue
            outcome = "ok" if n["ok"] else "untyped" if "untyped" in n else "refused"
            found["reads"][f"{name} {n['kind']} {outcome}"] += 1
            if outcome == "untyped":
                found["untyped errors"].append(f"{name}: {n['untyped']}")
            elif outcome == "refused":
                found["refusals"][f"{name}: {n['error'][:90]}"] += 1


def fresh() -> dict[str, Any]:
    return {"capture": Counter(), "search": Counter(), "reads": Counter(), "refusals": Counter(),
            "check failed": []}  # fmt: skip
