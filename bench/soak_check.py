"""What the soak (soak.py) checks once its writers have stopped, from their journals and
the stores: each command's outcome against what is stored, the chains, the erasures on
both servers, the audit reader's cursor; and the table it prints."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from contextlib import suppress
from pathlib import Path
from typing import Any

import soak_check_apps

TYPE_OF = {"delete": "delete", "usage": "usage", "batch_start": "batch_start",
           "batch_end": "batch_end"}  # kinds whose version the history must show as this  # fmt: skip
MARKED = ("insert", "replace", "stream", "session")  # kinds that store their mark as text


class Chaos:
    """What the chaos loop did, and when (for the time writes took to resume)."""

    def __init__(self) -> None:
        self.done: Counter[str] = Counter()
        self.failovers: list[float] = []  # wall-clock times of the promotions


def _notes(journals: Path) -> list[dict[str, Any]]:
    """Each command's outcome; a command whose writer was killed before its outcome was
    noted is unknown (None)."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(journals.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            with suppress(ValueError):  # a writer killed mid-line leaves half of one
                n = {**json.loads(line), "on": "sqlite" if "lite" in path.name else "pg"}
                if n["ok"] == "pending":
                    n["ok"] = None
                found[n["mark"]] = n
    return list(found.values())


def _texts(store: Any, cid: Any) -> tuple[Counter[str], dict[int, str], Counter[str]]:
    """The messages a context's events stored (inserted, replaced, streamed), each as its
    JSON text (a mark is found in it as a JSON string: in whatever shape it was stored);
    each version's event type; and the captured calls' requests as JSON text."""
    texts: Counter[str] = Counter()
    calls: Counter[str] = Counter()
    types: dict[int, str] = {}
    after = 0
    while True:
        page = store.hooks.events_after(cid, after)
        for e in page:
            types[e.version] = e.type
            p = e.payload
            if e.type == "insert":
                texts.update(json.dumps(m) for m in p["messages"])
            elif e.type == "replace":
                texts[json.dumps(p["message"])] += 1
            elif e.type == "append":
                texts[json.dumps(p["deltas"])] += 1
            elif e.type == "usage" and p.get("call"):
                calls[json.dumps(p["call"].get("request"))] += 1
        if len(page) < 500:
            return texts, types, calls
        after = page[-1].version


def _count(texts: Counter[str], mark: str) -> int:
    """How many stored messages carry `mark`."""
    quoted = json.dumps(mark)
    return sum(n for text, n in texts.items() if quoted in text)


def check(journals: Path, apps: Path, audit_file: Path, pg_url: str, standby_url: str,
          sqlite_url: str, chaos: Chaos) -> dict[str, Any]:  # fmt: skip
    from ctxstore.adapters.integrations.surface import listed_contexts
    from ctxstore.adapters.store.facade import ContextStore
    from ctxstore.domain.errors import ContextNotFoundError

    notes = _notes(journals)
    outcome = {True: "acknowledged", False: "refused", None: "unknown"}
    found: dict[str, Any] = {
        "commands": Counter(f"{n['kind']} {outcome[n['ok']]}" for n in notes),
        "chaos": dict(chaos.done), "lost": 0, "doubled": 0, "refused but stored": 0,
        "unknown stored twice": 0, "wrong event at version": 0, "broken links": 0,
        "erased but readable": 0,
        "untyped errors": [n["untyped"] for n in notes if "untyped" in n][:5],
        **soak_check_apps.fresh(),
    }  # fmt: skip
    events: set[tuple[str, int]] = set()
    for on, url in (("pg", pg_url), ("sqlite", sqlite_url)):
        mine = [n for n in notes if n["on"] == on]
        gone = {n["cid"] for n in mine if n["kind"] == "erase" and n["ok"] is not False}
        try:  # a store that cannot be read (corrupt, say) is a finding, not the end of it
            with ContextStore.from_url(url) as store:
                found["broken links"] += len(store.verify().broken)
                texts: Counter[str] = Counter()
                calls: Counter[str] = Counter()
                shown: dict[str, set[tuple[str, str]]] = defaultdict(set)
                types: dict[tuple[str, int], str] = {}
                for summary in listed_contexts(store):
                    cid = str(summary.context_id)
                    held, versions, requests = _texts(store, cid)
                    texts += held
                    calls += requests
                    soak_check_apps.shown_marks(store, cid, shown)
                    types.update({(cid, v): t for v, t in versions.items()})
                    if on == "pg":
                        events.update((cid, v) for v in versions)
                for n in mine:
                    if n.get("cid") in gone:
                        continue
                    if n["kind"] in MARKED:
                        k = _count(texts, n["mark"])
                        if n["ok"] is True and k != 1:
                            found["lost" if k == 0 else "doubled"] += 1
                            found.setdefault("examples", []).append(n)
                        elif n["ok"] is False and k:
                            found["refused but stored"] += 1
                        elif n["ok"] is None and k > 1:
                            found["unknown stored twice"] += 1
                    want = TYPE_OF.get(n["kind"])
                    if want and n["ok"] and n.get("version"):
                        there = types.get((n["cid"], n["version"]))
                        if there != want:
                            found["wrong event at version"] += 1
                            found.setdefault("examples", []).append({**n, "found": there})
                erased = [n["cid"] for n in mine if n["kind"] == "erase" and n["ok"]]
                readers = [store] + ([ContextStore.from_url(standby_url)] if on == "pg" else [])
                for reader in readers:
                    for cid in erased:
                        try:
                            reader.visible(cid)
                            found["erased but readable"] += 1
                        except ContextNotFoundError:
                            pass
                for reader in readers[1:]:
                    reader.close()
                others = soak_check_apps.of_store(apps, on)
                soak_check_apps.check_capture(found, others, calls)
                marks = [n["mark"] for n in mine if n["kind"] in MARKED and n["ok"]]
                marks += [n["mark"] for ns in others.values() for n in ns
                          if n["kind"] in ("agents", "otel") and n["ok"] is True]  # fmt: skip
                soak_check_apps.check_search(found, store, marks, shown)
                soak_check_apps.tally(found, others)
        except Exception as exc:  # noqa: BLE001
            found["check failed"].append(f"{on}: {exc!r}"[:300])
    seen = Counter(tuple(line.split()) for line in audit_file.read_text().splitlines())
    seen_pairs = {(c, int(v)) for c, v in seen}
    found["audit"] = {"read": sum(seen.values()),
                      "repeated": sum(v - 1 for v in seen.values() if v > 1),
                      "missed": len(events - seen_pairs),
                      "missed examples": sorted(events - seen_pairs)[:5]}  # fmt: skip
    pg_acks = sorted(n["t"] for n in notes if n["on"] == "pg" and n["ok"])
    found["resumed after failover s"] = [
        round(min((t for t in pg_acks if t > at), default=float("nan")) - at, 2)
        for at in chaos.failovers
    ]
    return found


def print_table(found: dict[str, Any]) -> None:
    print(f"\nsoak: {found['seconds']:g} s")
    for example in found.get("examples", [])[:10]:
        print(f"  did not hold: {example}")
    print("  commands (kind outcome):")
    for what, n in sorted(found["commands"].items()):
        print(f"    {what:<32} {n:>7,}")
    for key in ("chaos", "disk filled", "resumed after failover s", "lost", "doubled",
                "refused but stored", "unknown stored twice", "wrong event at version",
                "broken links", "erased but readable", "untyped errors", "audit",
                "memory", "primary's client connections (peak)", "check failed"):  # fmt: skip
        print(f"  {key:<32} {found.get(key)}")
    for key in ("capture", "search", "reads", "refusals"):
        print(f"  {key}:")
        for what, n in sorted(found[key].items()):
            print(f"    {what:<60} {n:>7,}")
    print("  peak memory MB of each process, by tenth of the run:")
    for name, peaks in sorted(found.get("memory over time", {}).items()):
        print(f"    {name:<14} {' '.join(f'{p:>4}' for p in peaks)}")


def held(found: dict[str, Any]) -> list[str]:
    """What did not hold (empty: everything did)."""
    bad = [k for k in ("lost", "doubled", "refused but stored", "unknown stored twice",
                       "wrong event at version", "broken links", "erased but readable")
           if found[k]]  # fmt: skip
    bad += [f"audit {k}" for k in ("repeated", "missed") if found["audit"][k]]
    bad += ["untyped errors"] if found["untyped errors"] else []
    bad += [f"capture {k}" for k in ("doubled", "lost", "captured but not made")
            if found["capture"][k]]  # fmt: skip
    bad += [
        f"search {k}"
        for k in (
            "index vs rebuild differ",
            "index vs visible messages differ",
            "rebuild vs visible messages differ",
        )
        if found["search"][k]
    ]
    bad += ["check failed"] if found["check failed"] else []
    return bad
