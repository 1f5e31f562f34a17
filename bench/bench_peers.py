"""ctxstore beside what users would otherwise pick, on the same machine in the same run.

    pip install -e '.[bench]' && python bench/bench_peers.py [--turns 500] [--skip-pg]
        [--sections floor,langgraph,agents,claude,adk,blobs,reads]

1. The raw driver floor: an agent session's commands (each message inserted as it comes,
   batches kept or rolled back, compactions) against plain INSERTs of the very rows
   ctxstore stored, in the same transactions, through sqlite3 and psycopg: events/s.
2. A LangGraph checkpointer persisting the same agent conversation as graph state (SQLite
   and PostgreSQL savers; default channels and DeltaChannel): time per turn over the last
   50 turns, bytes stored, time to list the whole history; against ctxstore appending the
   same turns (its history listed, and also replayed state by state). A peer's listing
   still going after --listing-budget seconds (30) is stopped: its time and ratio are then
   lower bounds, printed with > and >= (the delta saver's takes minutes on a slow day).
3. The OpenAI Agents SDK's sessions (SQLiteSession; SQLAlchemySession on PostgreSQL)
   against ctxstore's session on the same database: items added per second, get_items.
4. The Claude Agent SDK's session store against its default persistence (the transcript
   appended to a local JSONL file, read by its own reader), and Google ADK's session
   service against its DatabaseSessionService on the same database: appends and loads per
   second; a session repeating one 1 MB image in every turn: the bytes its blobs take
   (bench/sdk_peers.py).
5. ctxstore's read paths at 100, 1,000, 10,000 and 100,000 events: a cold head read, a
   warm one, time travel to the middle, a rollback, an audit page.

Prints ratios measured in one run and draws docs/explanation/performance.png.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import operator
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, TypedDict

import psycopg
from langgraph.channels.delta import DeltaChannel
from langgraph.graph import START, StateGraph

from ctxstore.adapters.integrations.agents_session import CtxStoreSession
from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore

sys.path.insert(0, str(Path(__file__).parent))
import langgraph_agent
import sdk_peers
from floor import Floor, RawPostgres, RawSQLite
from scratch_pg import scratch_databases
from workload import COMPACT_EVERY, build_history, run_command, session_commands, turns

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/postgres"
PLOT = Path(__file__).resolve().parents[1] / "docs" / "explanation" / "performance.png"
SERIES: dict[str, Any] = {}  # what the plot draws
LISTING_BUDGET = 30.0  # seconds a peer's listing may take before it is stopped (--listing-budget)


def timed(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


# ---- the raw driver floor ------------------------------------------------------------------


def floor_appends(label: str, url: str, make_floor: Callable[[], Floor],
                  conversation: list[list[dict[str, Any]]], block: int = 100) -> None:  # fmt: skip
    """ctxstore running an agent session's commands against the raw driver inserting the
    very rows ctxstore stored, grouped in transactions as ctxstore committed them.

    The two take turns, `block` commands at a time (the floor writes what ctxstore has
    just stored), so a drift of this machine's speed falls on both alike.
    """
    commands = list(session_commands(conversation))
    warm = 30  # tables, tokenizer, caches
    with ContextStore.from_url(url) as store:
        cid = store.create(name="floor run")
        version = 1
        for command in commands[:warm]:
            version = run_command(store, cid, command)
        raw = make_floor()
        try:
            states = [e.state for e in store._storage.recorder.select_events(cid)]
            raw.write([[s] for s in states])  # warmed up alike
            ours = floor = 0.0
            row_bytes: list[int] = []
            for start in range(warm, len(commands), block):
                first, counts = version, []
                t = time.perf_counter()
                for command in commands[start : start + block]:
                    after = run_command(store, cid, command)
                    counts.append(after - version)
                    version = after
                ours += time.perf_counter() - t
                rows = [e.state for e in store._storage.recorder.select_events(cid, gt=first)]
                assert len(rows) == sum(counts), "each command's events, as the floor groups them"
                row_bytes += [len(r) for r in rows]
                groups, at = [], 0
                for count in counts:  # the commands that wrote nothing have no transaction
                    if count:
                        groups.append(rows[at : at + count])
                        at += count
                floor += raw.write(groups)
        finally:
            raw.close()
    events = len(row_bytes)
    print(
        f"\n{label}: an agent session's {len(commands) - warm:,} commands (each message "
        f"inserted as it comes; batches kept or rolled back; a compaction every {COMPACT_EVERY} turns) "
        f"stored {events:,} events, rows of {statistics.mean(row_bytes):,.0f} B on average.\n"
        f"  appends: ctxstore {events / ours:,.0f} events/s, the same rows in the same "
        f"transactions through the driver {events / floor:,.0f}/s = {floor / ours:.2f}x "
        "(target >= 0.5x)"
    )


# ---- LangGraph ------------------------------------------------------------------------


def _append(state: list[Any], writes: Sequence[Any]) -> list[Any]:
    out = list(state or [])
    for w in writes:
        out.extend(w if isinstance(w, list) else [w])
    return out


class State(TypedDict):
    messages: Annotated[list[Any], operator.add]  # LangGraph's default: the whole list


class DeltaState(TypedDict):
    messages: Annotated[list[Any], DeltaChannel(_append)]  # the writes, plus snapshots


def langgraph_graph(saver: Any, delta: bool) -> Any:
    builder: Any = StateGraph(DeltaState if delta else State)
    builder.add_node("agent", lambda state: {})  # the model's reply comes in the input
    builder.add_edge(START, "agent")
    return builder.compile(checkpointer=saver)


def list_all(history: Iterable[Any], budget: float) -> tuple[float, bool]:
    """(seconds, finished) to list a peer's whole history. A listing still going after
    `budget` seconds (LangGraph's delta mode rebuilds every state: a minute or more here)
    is stopped, and its time is a lower bound; 0: no budget."""
    started = time.perf_counter()
    for _ in history:
        if budget and time.perf_counter() - started > budget:
            return time.perf_counter() - started, False
    return time.perf_counter() - started, True


def run_langgraph(saver: Any, conversation: list[list[dict[str, Any]]], delta: bool,
                  size: Callable[[], int], budget: float) -> dict[str, Any]:  # fmt: skip
    graph = langgraph_graph(saver, delta)
    config = {"configurable": {"thread_id": "t1"}}
    per_turn = []
    for messages in conversation:
        per_turn.append(timed(functools.partial(graph.invoke, {"messages": messages}, config)))
    listing, finished = list_all(graph.get_state_history(config), budget)
    return {"per_turn": per_turn, "bytes": size(), "list": listing, "listed": finished}


def run_ctxstore(store: ContextStore, conversation: list[list[dict[str, Any]]]) -> dict[str, Any]:
    cid = store.create(name="peer run")
    per_turn = [timed(functools.partial(store.insert, cid, m)) for m in conversation]
    audit = 0
    live = None
    raw = sum(len(e.state) for e in store._storage.recorder.select_events(cid))
    if store._storage.snapshots is not None:
        raw += sum(len(s.state) for s in store._storage.snapshots.recorder.select_events(cid))
    if store.url.startswith("postgresql") and store._storage.snapshots is not None:
        # On PostgreSQL both sides are measured as the relations' size on disk (after TOAST).
        tables = [
            store._storage.recorder.events_table_name,  # type: ignore[attr-defined]
            store._storage.snapshots.recorder.events_table_name,  # type: ignore[attr-defined]
        ]
        with psycopg.connect(store.url) as conn:
            row = conn.execute(
                "SELECT " + " + ".join("pg_total_relation_size(%s)" for _ in tables), tables
            ).fetchone()
            raw = int(row[0]) if row else raw
            live = live_bytes(conn, tables)
            # The audit index is derived (rebuilt from events), built on the first audit
            # read: reported beside the figure, not in it.
            store.audit(limit=1)
            row = conn.execute("SELECT pg_total_relation_size('ctxstore_audit')").fetchone()
            audit = int(row[0]) if row else 0
    # A cold listing takes ~20 ms: one stall of the machine (PostgreSQL checkpointing the
    # peers' hundreds of MB, say) would be most of it, so it is the median of five, each
    # from a newly opened store. The peers' listings take seconds and are timed once.
    listings = []
    for _ in range(5):
        fresh = type(store).from_url(store.url, store.settings)
        listings.append(timed(functools.partial(fresh.history, cid)))
        fresh.close()
    listing = statistics.median(listings)
    fresh = type(store).from_url(store.url, store.settings)
    replay = timed(lambda: list(fresh.replay(cid)))
    fresh.close()
    return {
        "per_turn": per_turn, "bytes": raw, "list": listing, "replay": replay, "audit": audit,
        "live": live,
    }  # fmt: skip


def agent_sqlite(folder: Path, conversation: list[list[dict[str, Any]]]) -> None:
    """The agent a LangGraph user runs (bench/langgraph_agent.py) on CtxStoreSaver and on
    SqliteSaver (default channels and DeltaChannel), interleaved turn by turn."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    from ctxstore.adapters.integrations.langgraph_saver import CtxStoreSaver

    conns = [sqlite3.connect(folder / f"agent_{n}.db", check_same_thread=False) for n in (0, 1)]
    try:
        with ContextStore.from_url(f"sqlite:///{folder / 'agent_ours.db'}") as store:
            savers = {
                "CtxStoreSaver": CtxStoreSaver(store), "SqliteSaver": SqliteSaver(conns[0]),
                "SqliteSaver (DeltaChannel)": SqliteSaver(conns[1]),
            }  # fmt: skip
            times = langgraph_agent.interleaved(
                savers, conversation, frozenset({"SqliteSaver (DeltaChannel)"})
            )
            ours = saver_bytes(store, "langgraph:CtxStoreSaver")
        theirs = [sqlite_saver_bytes(c) for c in conns]
    finally:
        for c in conns:
            c.close()
    langgraph_agent.report("SQLite", times, "CtxStoreSaver")
    print(f"  stored: CtxStoreSaver {ours / 1e6:.2f} MB (events and snapshots), SqliteSaver "
          f"{theirs[0] / 1e6:.2f} MB, with DeltaChannel {theirs[1] / 1e6:.2f} MB")  # fmt: skip
    SERIES.setdefault("write", {}).update(
        {f"{name} (agent, SQLite)": t for name, t in times.items()}
    )


def agent_postgres(url: str, conversation: list[list[dict[str, Any]]]) -> None:
    """The agent on CtxStoreSaver and PostgresSaver (both channel kinds), interleaved."""
    from langgraph.checkpoint.postgres import PostgresSaver

    from ctxstore.adapters.integrations.langgraph_saver import CtxStoreSaver

    with (
        PostgresSaver.from_conn_string(url) as theirs,
        PostgresSaver.from_conn_string(url) as theirs_delta,
        ContextStore.from_url(url) as store,
    ):
        theirs.setup()
        with psycopg.connect(url, autocommit=True) as c:
            c.execute("TRUNCATE checkpoints, checkpoint_blobs, checkpoint_writes")
        savers = {
            "CtxStoreSaver": CtxStoreSaver(store, key_prefix=f"agent-{time.monotonic_ns()}:"),
            "PostgresSaver": theirs, "PostgresSaver (DeltaChannel)": theirs_delta,
        }  # fmt: skip
        times = langgraph_agent.interleaved(
            savers, conversation, frozenset({"PostgresSaver (DeltaChannel)"})
        )
    langgraph_agent.report("PostgreSQL", times, "CtxStoreSaver")


def saver_bytes(store: ContextStore, key: str) -> int:
    """The bytes of a CtxStoreSaver thread's events and snapshots."""
    cid = store.lookup_key(key)
    if cid is None:
        return 0
    found = sum(len(e.state) for e in store._storage.recorder.select_events(cid))
    if store._storage.snapshots is not None:
        found += sum(len(s.state) for s in store._storage.snapshots.recorder.select_events(cid))
    return found


def sqlite_saver_bytes(c: sqlite3.Connection) -> int:
    row = c.execute(
        "SELECT (SELECT COALESCE(SUM(LENGTH(checkpoint) + LENGTH(metadata)), 0) "
        "FROM checkpoints) + (SELECT COALESCE(SUM(LENGTH(value)), 0) FROM writes)"
    ).fetchone()
    return int(row[0])


def live_bytes(conn: psycopg.Connection[Any], tables: Sequence[str]) -> int | None:
    """The tables' size on disk less what deleted rows and free space take (pgstattuple):
    what stays once (auto)vacuum has marked deleted rows' space for reuse. None without
    the pgstattuple extension."""
    try:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pgstattuple")
    except psycopg.Error:
        conn.rollback()
        return None
    total = 0
    for table in tables:
        row = conn.execute(
            "SELECT t.oid, t.reltoastrelid FROM pg_class t WHERE t.oid = %s::regclass", (table,)
        ).fetchone()
        if row is None:
            continue
        for rel in [row[0], row[1]] if row[1] else [row[0]]:
            found = conn.execute(
                "SELECT s.table_len - s.dead_tuple_len - s.free_space, pg_indexes_size(%s) "
                "FROM pgstattuple(%s) s",
                (rel, rel),
            ).fetchone()
            total += int(found[0]) + int(found[1]) if found else 0
    conn.commit()
    return total


def compare_langgraph(label: str, conversation: list[list[dict[str, Any]]],
                      ours: dict[str, Any], peers: dict[str, dict[str, Any]]) -> None:  # fmt: skip
    def last50(r: dict[str, Any]) -> float:
        return float(statistics.mean(r["per_turn"][-50:]))

    n = len(conversation)
    messages = sum(len(t) for t in conversation)
    print(f"\n{label}: {n} turns, {messages} messages")
    print(f"  {'':28} {'ms/turn (last 50)':>18} {'MB stored':>10} {'list all (s)':>13}")
    print(f"  {'ctxstore':28} {last50(ours) * 1e3:18.2f} {ours['bytes'] / 1e6:10.2f} "
          f"{ours['list']:13.3f}   (replaying every state: {ours['replay']:.3f} s)")  # fmt: skip
    if ours["audit"]:
        print(f"  {'':28} {'':18} {'':10} {'':13}   (its audit index, once built: "
              f"{ours['audit'] / 1e6:.2f} MB more)")  # fmt: skip
    for name, r in peers.items():
        listed = f"{r['list']:13.3f}" if r["listed"] else f"{'>' + format(r['list'], '.3f'):>13}"
        at_least = "" if r["listed"] else ">="
        stopped = "" if r["listed"] else f" (its listing stopped after {r['list']:.0f} s)"
        print(
            f"  {name:28} {last50(r) * 1e3:18.2f} {r['bytes'] / 1e6:10.2f} {listed}"
            f"   ctxstore: {last50(r) / last50(ours):.0f}x faster per turn, "
            f"{r['bytes'] / ours['bytes']:.0f}x fewer bytes, "
            f"{at_least}{r['list'] / ours['list']:.0f}x faster listing{stopped}"
        )
    if ours.get("live"):
        # Deleted rows (superseded snapshots) stay on disk until (auto)vacuum frees them.
        lives = ", ".join(
            f"{name} {r['live'] / 1e6:.2f} MB ({r['live'] / ours['live']:.0f}x)"
            for name, r in peers.items()
            if r.get("live")
        )
        print(f"  live bytes (pgstattuple, deleted rows and free space left out): "
              f"ctxstore {ours['live'] / 1e6:.2f} MB; {lives}")  # fmt: skip
    SERIES.setdefault("write", {})[f"ctxstore ({label})"] = ours["per_turn"]
    SERIES.setdefault("bytes", {})[f"ctxstore ({label})"] = ours["bytes"]
    for name, r in peers.items():
        SERIES["write"][f"{name} ({label})"] = r["per_turn"]
        SERIES["bytes"][f"{name} ({label})"] = r["bytes"]


def langgraph_sqlite(folder: Path, conversation: list[list[dict[str, Any]]], budget: float) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver

    peers = {}
    for delta in (False, True):
        path = folder / f"lg_{delta}.db"
        conn = sqlite3.connect(path, check_same_thread=False)
        saver = SqliteSaver(conn)

        def size(c: sqlite3.Connection = conn) -> int:
            rows = c.execute(
                "SELECT (SELECT COALESCE(SUM(LENGTH(checkpoint) + LENGTH(metadata)), 0) "
                "FROM checkpoints) + (SELECT COALESCE(SUM(LENGTH(value)), 0) FROM writes)"
            ).fetchone()
            return int(rows[0])

        peers[f"LangGraph SqliteSaver{' delta' if delta else ''}"] = run_langgraph(
            saver, conversation, delta, size, budget
        )
        conn.close()
    with ContextStore.from_url(f"sqlite:///{folder / 'ours.db'}") as store:
        ours = run_ctxstore(store, conversation)
    compare_langgraph("SQLite", conversation, ours, peers)
    agent_sqlite(folder, conversation)


def langgraph_postgres(url: str, conversation: list[list[dict[str, Any]]], budget: float) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    peers = {}
    for delta in (False, True):
        with PostgresSaver.from_conn_string(url) as saver:
            saver.setup()
            with psycopg.connect(url, autocommit=True) as c:
                c.execute("TRUNCATE checkpoints, checkpoint_blobs, checkpoint_writes")

            def size() -> int:
                with psycopg.connect(url) as c:
                    row = c.execute(
                        "SELECT pg_total_relation_size('checkpoints') + "
                        "pg_total_relation_size('checkpoint_blobs') + "
                        "pg_total_relation_size('checkpoint_writes')"
                    ).fetchone()
                    return int(row[0]) if row else 0

            name = f"LangGraph PostgresSaver{' delta' if delta else ''}"
            peers[name] = run_langgraph(saver, conversation, delta, size, budget)
            with psycopg.connect(url) as c:
                tables = ["checkpoints", "checkpoint_blobs", "checkpoint_writes"]
                peers[name]["live"] = live_bytes(c, tables)
    with ContextStore.from_url(url) as store:
        ours = run_ctxstore(store, conversation)
    compare_langgraph("PostgreSQL", conversation, ours, peers)
    agent_postgres(url, conversation)


# ---- Agents SDK sessions -------------------------------------------------------------------


def session_items(conversation: list[list[dict[str, Any]]]) -> list[list[dict[str, Any]]]:
    """Each turn as the plain message items a session stores."""
    return [[{"role": m["role"], "content": m.get("content") or "(tool call)"} for m in t]
            for t in conversation]  # fmt: skip


async def time_sessions(
    ours: Any, theirs: Any, batches: list[list[dict[str, Any]]], block: int = 20
) -> tuple[tuple[float, float], tuple[float, float]]:
    """(items/s added, seconds per get_items(limit=50)) for each session, ours first.

    The two take turns, `block` adds at a time, so a drift of this machine's speed over
    the run (it is shared) falls on both alike.
    """
    added = [0.0, 0.0]
    sessions = (ours, theirs)
    for session in sessions:
        await session.add_items([{"role": "user", "content": "warm up"}])  # tables, tokenizer
    for start in range(0, len(batches), block):
        for side, session in enumerate(sessions):
            t = time.perf_counter()
            for items in batches[start : start + block]:
                await session.add_items(items)
            added[side] += time.perf_counter() - t
    total = sum(len(b) for b in batches)
    gets = [0.0, 0.0]
    for _ in range(20):
        for side, session in enumerate(sessions):
            t = time.perf_counter()
            await session.get_items(limit=50)
            gets[side] += time.perf_counter() - t
    return (total / added[0], gets[0] / 20), (total / added[1], gets[1] / 20)


def compare_sessions(label: str, ours: tuple[float, float], theirs: tuple[float, float],
                     name: str, target: float) -> None:  # fmt: skip
    print(
        f"\n{label}: add {ours[0]:,.0f} items/s (ctxstore) vs {theirs[0]:,.0f} ({name}) = "
        f"{ours[0] / theirs[0]:.2f}x (target >= {target}x); get_items(limit=50) "
        f"{ours[1] * 1e3:.2f} ms vs {theirs[1] * 1e3:.2f} ms"
    )


def agents_sqlite(folder: Path, conversation: list[list[dict[str, Any]]]) -> None:
    """At each durability both sides offer: a commit on the disk when it returns (both
    sides' default), and a commit in the write-ahead log (synchronous=NORMAL on both)."""
    from agents.memory import SQLiteSession

    class NormalSQLiteSession(SQLiteSession):
        @staticmethod
        def _configure_connection(conn: sqlite3.Connection) -> None:
            SQLiteSession._configure_connection(conn)
            conn.execute("PRAGMA synchronous = NORMAL")

    batches = session_items(conversation)
    for level, sdk_type in (("full", SQLiteSession), ("normal", NormalSQLiteSession)):
        url = f"sqlite:///{folder / f'ours_sessions_{level}.db'}"
        with ContextStore.from_url(url, Settings(sqlite_synchronous=level)) as store:
            sdk = sdk_type("s", str(folder / f"sdk_{level}.db"))
            ours, theirs = asyncio.run(time_sessions(CtxStoreSession("s", store), sdk, batches))
        compare_sessions(f"Agents SDK sessions, SQLite, synchronous={level} on both sides",
                         ours, theirs, "SQLiteSession", 1.0)  # fmt: skip


def agents_postgres(url: str, conversation: list[list[dict[str, Any]]]) -> None:
    from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession

    batches = session_items(conversation)
    async_url = url.replace("postgresql://", "postgresql+asyncpg://", 1)

    with ContextStore.from_url(url) as store:

        async def both() -> tuple[tuple[float, float], tuple[float, float]]:
            sdk = SQLAlchemySession.from_url("s", url=async_url, create_tables=True)
            try:
                return await time_sessions(CtxStoreSession("s", store), sdk, batches)
            finally:
                await sdk.engine.dispose()

        ours, theirs = asyncio.run(both())
    compare_sessions("Agents SDK sessions, PostgreSQL", ours, theirs, "SQLAlchemySession", 2.5)


# ---- ctxstore's read paths against history length ----------------------------------------


def read_round(url: str, store: ContextStore, cid: Any, size: int) -> dict[str, float]:
    """One sample of each read path's cost (seconds) on a context of `size` events."""
    costs: dict[str, float] = {}
    with ContextStore.from_url(url) as fresh:  # nothing cached: the snapshot and the tail
        costs["head (cold)"] = timed(lambda: fresh.visible(cid))
    costs["head (warm)"] = min(timed(lambda: store.visible(cid)) for _ in range(5))
    costs["time travel"] = timed(lambda: store.visible(cid, at_version=size // 2))
    store.batch_start(cid)
    store.insert(cid, {"role": "user", "content": "to be undone"})
    costs["rollback"] = timed(lambda: store.batch_end(cid))
    after = max(store._storage.audit_index.position() - 60, 0)
    costs["audit page"] = timed(lambda: store.audit(context_id=cid, after=after, limit=50))
    return costs


def read_paths(
    label: str, make_url: Callable[[int], str], sizes: Sequence[int], rounds: int = 5
) -> None:
    """Each path's median over `rounds`; every round samples every size in turn, so a drift
    of this shared machine's speed over the minutes the histories take to build and read
    falls on all sizes alike."""
    built = []
    for size in sizes:
        url = make_url(size)
        with ContextStore.from_url(url) as loader:
            cid = build_history(loader, size)
        store = ContextStore.from_url(url)
        store.audit(limit=1)  # index what the bulk load wrote
        built.append((url, store, cid, size))
    samples: dict[str, list[list[float]]] = {}
    try:
        for _ in range(rounds):
            for i, (url, store, cid, size) in enumerate(built):
                for path, cost in read_round(url, store, cid, size).items():
                    samples.setdefault(path, [[] for _ in sizes])[i].append(cost)
    finally:
        for _, store, _, _ in built:
            store.close()
    rows = {path: [statistics.median(s) for s in per_size] for path, per_size in samples.items()}
    print(
        f"\n{label}: ctxstore read paths by history length "
        f"(ms, median of {rounds} rounds; ratio to the smallest)"
    )
    print("  " + f"{'events':>16}" + "".join(f"{s:>12,}" for s in sizes) + "   ratio")
    for path, costs in rows.items():
        cells = "".join(f"{c * 1e3:12.2f}" for c in costs)
        print(f"  {path:>16}{cells}   {costs[-1] / costs[0]:5.2f}x (target <= 2x)")
    SERIES.setdefault("reads", {})[label] = (list(sizes), rows)


# ---- plot ---------------------------------------------------------------------------------


def plot() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(18, 5.5))
    for label, (sizes, rows) in SERIES.get("reads", {}).items():
        for path, costs in rows.items():
            axes[0].plot(sizes, [c * 1e3 for c in costs], marker="o", label=f"{path}, {label}")
    axes[0].set(xscale="log", yscale="log", xlabel="events in the context", ylabel="ms",
                title="ctxstore read paths against history length")  # fmt: skip
    for name, per_turn in SERIES.get("write", {}).items():
        axes[1].plot(range(1, len(per_turn) + 1), [t * 1e3 for t in per_turn], label=name)
    axes[1].set(yscale="log", xlabel="turn", ylabel="ms per turn",
                title="writing a turn as the conversation grows")  # fmt: skip
    names = list(SERIES.get("bytes", {}))
    axes[2].barh(names, [SERIES["bytes"][n] / 1e6 for n in names])
    axes[2].set(xscale="log", xlabel="MB stored", title="bytes stored for the conversation")
    for ax in axes[:2]:
        if ax.get_legend_handles_labels()[0]:  # a run of some sections draws on some axes
            ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(PLOT, dpi=110)
    print(f"\nplot: {PLOT}")


SECTIONS = ("floor", "langgraph", "agents", "claude", "adk", "blobs", "reads")


def unreachable(url: str) -> str | None:
    """Why PostgreSQL at `url` cannot be used for the scratch databases, or None."""
    try:
        with psycopg.connect(url, connect_timeout=5):
            return None
    except psycopg.Error as exc:
        return str(exc).strip().splitlines()[0]


@contextmanager
def took(label: str) -> Iterator[None]:
    """Print how long a section took (the suite must stay within minutes)."""
    started = time.perf_counter()
    yield
    print(f"  [{label}: {time.perf_counter() - started:.0f} s]")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--sizes", default="100,1000,10000,100000")
    parser.add_argument("--pg", default=os.environ.get("CTXSTORE_BENCH_PG", DEFAULT_PG))
    parser.add_argument("--skip-pg", action="store_true")
    parser.add_argument("--sections", default=",".join(SECTIONS))
    parser.add_argument("--listing-budget", type=float, default=LISTING_BUDGET,
                        help="seconds before a peer's listing is stopped (0: list it all)")  # fmt: skip
    args = parser.parse_args()
    sections = set(args.sections.split(","))
    if unknown := sections - set(SECTIONS):
        parser.error(f"unknown sections {sorted(unknown)}; the sections are {', '.join(SECTIONS)}")
    conversation = list(turns(args.turns))
    sizes = [int(s) for s in args.sizes.split(",")]
    started = time.perf_counter()
    if not args.skip_pg and (problem := unreachable(args.pg)):
        print(f"PostgreSQL sections skipped: {problem} (--pg, or --skip-pg to skip them)")
        args.skip_pg = True
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if "floor" in sections:
            url = f"sqlite:///{folder / 'floor.db'}"
            with took("floor, SQLite"):
                floor_appends("SQLite", url, lambda: RawSQLite(folder / "raw.db"), conversation)
        if "langgraph" in sections:
            with took("LangGraph, SQLite"):
                langgraph_sqlite(folder, conversation, args.listing_budget)
        if "agents" in sections:
            with took("Agents SDK, SQLite"):
                agents_sqlite(folder, conversation)
        if "claude" in sections:
            with took("Claude Agent SDK, SQLite"):
                sdk_peers.claude(
                    f"sqlite:///{folder / 'claude.db'}", folder, conversation,
                    "SQLite, synchronous=normal: both survive a killed process, not a power cut",
                    Settings(sqlite_synchronous="normal"),
                )  # fmt: skip
        if "adk" in sections:
            with took("Google ADK, SQLite"):
                sdk_peers.adk(f"sqlite:///{folder / 'adk_ours.db'}",
                              f"sqlite+aiosqlite:///{folder / 'adk_theirs.db'}", conversation,
                              "SQLite")  # fmt: skip
            with took("Google ADK reads, SQLite"):
                sdk_peers.adk_reads(f"sqlite:///{folder / 'adk_reads_ours.db'}",
                                    f"sqlite+aiosqlite:///{folder / 'adk_reads_theirs.db'}",
                                    "SQLite")  # fmt: skip
        if "blobs" in sections:
            with took("attachments, SQLite"):
                sdk_peers.blobs(f"sqlite:///{folder / 'blobs.db'}", "SQLite")
        if "reads" in sections:
            with took("read paths, SQLite"):
                read_paths("SQLite", lambda n: f"sqlite:///{folder / f'reads_{n}.db'}", sizes)
        if not args.skip_pg:
            with scratch_databases(args.pg) as fresh:
                if "floor" in sections:
                    url = fresh()
                    with took("floor, PostgreSQL"):
                        floor_appends("PostgreSQL", url, lambda: RawPostgres(url), conversation)
                if "langgraph" in sections:
                    with took("LangGraph, PostgreSQL"):
                        langgraph_postgres(fresh(), conversation, args.listing_budget)
                if "agents" in sections:
                    with took("Agents SDK, PostgreSQL"):
                        agents_postgres(fresh(), conversation)
                if "claude" in sections:
                    with took("Claude Agent SDK, PostgreSQL"):
                        sdk_peers.claude(fresh(), folder, conversation, "PostgreSQL")
                if "adk" in sections:
                    with took("Google ADK, PostgreSQL"):
                        theirs = fresh().replace("postgresql://", "postgresql+asyncpg://", 1)
                        sdk_peers.adk(fresh(), theirs, conversation, "PostgreSQL")
                    with took("Google ADK reads, PostgreSQL"):
                        theirs = fresh().replace("postgresql://", "postgresql+asyncpg://", 1)
                        sdk_peers.adk_reads(fresh(), theirs, "PostgreSQL")
                if "blobs" in sections:
                    with took("attachments, PostgreSQL"):
                        sdk_peers.blobs(fresh(), "PostgreSQL")
                if "reads" in sections:
                    with took("read paths, PostgreSQL"):
                        read_paths("PostgreSQL", lambda _: fresh(), sizes)
    if SERIES:
        plot()
    print(f"total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
