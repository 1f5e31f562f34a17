"""The async store against the thread hop, through the OpenAI Agents SDK's session
protocol: items added per second by CtxStoreSession over `ctxstore.aopen` (adds awaited on
the loop) and over the sync store (each add on a worker thread), against the SDK's own
backends, all in one run and taking turns, 20 adds at a time (this machine is shared):

- SQLite: SQLiteSession and AdvancedSQLiteSession (which, like ctxstore, keeps structure
  and usage). Targets: async >= 1x AdvancedSQLiteSession, >= 0.6x SQLiteSession, and
  faster than the thread hop.
- PostgreSQL: SQLAlchemySession (asyncpg). Target: async >= 1.5x.

Beside each rate: the longest the event loop went without turning while those adds ran
(the thread hop and the async store should leave it free; the SDK's SQLite sessions run
on threads too).

    python bench/bench_async.py [--turns 300] [--pg postgresql://postgres@127.0.0.1:5432/postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Self

from scratch_pg import scratch_databases
from workload import turns

from ctxstore.adapters.integrations.agents_session import CtxStoreSession
from ctxstore.adapters.store.async_store import AsyncContextStore
from ctxstore.adapters.store.facade import ContextStore


def items_of(conversation: list[list[dict[str, Any]]]) -> list[list[dict[str, Any]]]:
    """Each turn as the plain message items a session stores."""
    return [[{"role": m["role"], "content": m.get("content") or "(tool call)"} for m in t]
            for t in conversation]  # fmt: skip


class Stalls:
    """The longest time the event loop went without turning while adds ran: a ticker asks
    to wake every millisecond and notes the longest gap past that."""

    TICK = 0.001

    def __init__(self) -> None:
        self.longest = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        last = time.perf_counter()
        while True:
            await asyncio.sleep(self.TICK)
            now = time.perf_counter()
            self.longest = max(self.longest, now - last - self.TICK)
            last = now

    def __enter__(self) -> Self:
        self._task = asyncio.get_running_loop().create_task(self._tick())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()


async def race(sessions: dict[str, Any], batches: list[list[dict[str, Any]]], block: int = 20
               ) -> tuple[dict[str, float], dict[str, float]]:  # fmt: skip
    """Items added per second by each session, taking turns `block` adds at a time; and
    the longest stall of the event loop (s) while each one's adds ran."""
    spent = dict.fromkeys(sessions, 0.0)
    stalls = {name: Stalls() for name in sessions}
    for session in sessions.values():
        await session.add_items([{"role": "user", "content": "warm up"}])
    for start in range(0, len(batches), block):
        for name, session in sessions.items():
            with stalls[name]:
                await asyncio.sleep(0)  # the ticker starts before the adds
                t = time.perf_counter()
                for items in batches[start : start + block]:
                    await session.add_items(items)
                spent[name] += time.perf_counter() - t
    total = sum(len(b) for b in batches)
    rates = {name: total / s for name, s in spent.items()}
    return rates, {name: stall.longest for name, stall in stalls.items()}


def report(
    label: str, measured: tuple[dict[str, float], dict[str, float]], targets: dict[str, float]
) -> None:
    rates, stalls = measured
    ours = rates["ctxstore async"]
    print(f"\n{label} (items added/s; longest event-loop stall while adding):")
    for name, rate in rates.items():
        line = f"  {name:<24} {rate:8,.0f}   stall {stalls[name] * 1000:7.1f} ms"
        if name != "ctxstore async":
            line += f"   async / this = {ours / rate:.2f}x"
            if name in targets:
                line += f" (target >= {targets[name]}x)"
        print(line)


async def sqlite(folder: Path, batches: list[list[dict[str, Any]]]) -> None:
    from agents.extensions.memory.advanced_sqlite_session import AdvancedSQLiteSession
    from agents.memory import SQLiteSession

    sync = ContextStore.from_url(f"sqlite:///{folder / 'sync.db'}")
    astore = await AsyncContextStore.open(f"sqlite:///{folder / 'async.db'}")
    try:
        measured = await race({
            "ctxstore async": CtxStoreSession("s", astore),
            "ctxstore thread hop": CtxStoreSession("s", sync),
            "SQLiteSession": SQLiteSession("s", str(folder / "sdk.db")),
            "AdvancedSQLiteSession": AdvancedSQLiteSession(
                session_id="s", db_path=str(folder / "adv.db"), create_tables=True
            ),
        }, batches)  # fmt: skip
    finally:
        await astore.close()
        sync.close()
    report("Agents SDK sessions, SQLite", measured,
           {"ctxstore thread hop": 1.0, "SQLiteSession": 0.8, "AdvancedSQLiteSession": 1.1})  # fmt: skip


async def postgres(make: Any, batches: list[list[dict[str, Any]]]) -> None:
    from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession

    theirs_url = make().replace("postgresql://", "postgresql+asyncpg://", 1)
    sync = ContextStore.from_url(make())
    astore = await AsyncContextStore.open(make())
    sdk = SQLAlchemySession.from_url("s", url=theirs_url, create_tables=True)
    try:
        measured = await race({
            "ctxstore async": CtxStoreSession("s", astore),
            "ctxstore thread hop": CtxStoreSession("s", sync),
            "SQLAlchemySession": sdk,
        }, batches)  # fmt: skip
    finally:
        await sdk.engine.dispose()
        await astore.close()
        sync.close()
    report("Agents SDK sessions, PostgreSQL", measured,
           {"ctxstore thread hop": 1.0, "SQLAlchemySession": 2.0})  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--pg", default=os.environ.get(
        "CTXSTORE_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres"))  # fmt: skip
    parser.add_argument("--skip-pg", action="store_true")
    args = parser.parse_args()
    batches = items_of(list(turns(args.turns)))
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(sqlite(Path(tmp), batches))
    if not args.skip_pg:
        with scratch_databases(args.pg) as make:
            asyncio.run(postgres(make, batches))


if __name__ == "__main__":
    main()
