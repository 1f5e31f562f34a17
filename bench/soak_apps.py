"""The soak's processes beside its writers (soak.py), each noting what it did in a journal
of its own (one JSON object a line):

- capture: an application making model calls against a local fake provider
  (tests/fake_provider.py), in turn an OpenAI Agents SDK run on `CtxStoreSession` (its call
  captured by the session) and a chat completion through the OpenAI client instrumented by
  opentelemetry-instrumentation-genai-openai with ctxstore's completion hook. Each call
  carries a mark of its own; the journal says which calls the provider received.
- worker: the projections' worker that `ctxstore serve` runs in the background (the audit
  index, then the search index), as a process of its own.
- searcher: searches for what writers acknowledged lately (a phrase: the mark).
- mcp: the official `mcp` client reading through `ctxstore mcp` (stdio): contexts listed,
  read, searched.

    python bench/soak_apps.py ROLE URL JOURNAL NAME SECONDS SEED WRITERS_JOURNALS
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]  # the repository: tests/fake_provider.py
AGENTS_KEY = "agents-session:"  # CtxStoreSession's key prefix: its context's key


class Journal:
    def __init__(self, path: Path) -> None:
        self._out = path.open("a", encoding="utf-8")

    def note(self, **fields: Any) -> None:
        # Flushed to the kernel: a process killed (not its machine) loses nothing noted.
        self._out.write(json.dumps({**fields, "t": time.time()}) + "\n")
        self._out.flush()


def opened(url: str, actor: str) -> Any:
    """The store, opening retried while the server is down or failing over."""
    from ctxstore.adapters.settings import Settings
    from ctxstore.adapters.store.facade import ContextStore
    from ctxstore.domain.errors import StoreUnavailableError

    while True:
        try:
            return ContextStore.from_url(url, Settings(actor=actor, connect_timeout=2,
                                                       statement_timeout=5))  # fmt: skip
        except StoreUnavailableError:
            time.sleep(0.5)


def _failure(journal: Journal, exc: BaseException, **fields: Any) -> None:
    """A typed refusal (a CtxStoreError) is expected under chaos; anything else is a defect."""
    from ctxstore.domain.errors import CtxStoreError

    if isinstance(exc, CtxStoreError):
        journal.note(**fields, ok=False, error=f"{type(exc).__name__}: {exc}"[:160])
    else:
        journal.note(**fields, ok=False, untyped=repr(exc)[:300])


# ---- capture ----------------------------------------------------------------------------


def capture(url: str, journal: Journal, name: str, seconds: float, seed: int, _: Path) -> None:
    """Model calls through one capture path (`agents` or `otel`, the name's first word):
    one path a process, as each recorded the other's calls too (see bench/soak_check_apps.py)."""
    asyncio.run(_capture(url, journal, name, seconds, seed))


async def _capture(url: str, journal: Journal, name: str, seconds: float, seed: int) -> None:
    sys.path.insert(0, str(ROOT))
    from agents import Agent, Runner, set_tracing_disabled
    from agents.models.openai_responses import OpenAIResponsesModel
    from openai import AsyncOpenAI, OpenAI

    import ctxstore.capture
    from ctxstore.adapters.integrations.agents_session import CtxStoreSession
    from tests.fake_provider import FakeProvider

    set_tracing_disabled(True)
    rng = random.Random(seed)
    provider = FakeProvider()
    store = opened(url, name)
    api = name.split("-")[0]
    agent = Agent(name="soak", instructions="Be brief.", model=OpenAIResponsesModel(
        "gpt-4o", AsyncOpenAI(base_url=provider.url + "/v1", api_key="k", max_retries=0)))  # fmt: skip
    client = OpenAI(base_url=provider.url + "/v1", api_key="k", max_retries=0)
    workflow = _instrumented(store) if api == "otel" else None
    otel_key = f"otel-{name}-{os.getpid()}"
    deadline = time.monotonic() + seconds
    n = 0
    while time.monotonic() < deadline:
        n += 1
        mark = f"{name}.{os.getpid()}.{n}"
        key = f"{AGENTS_KEY}{mark}" if workflow is None else otel_key  # a session per run
        journal.note(kind=api, mark=mark, key=key, ok="pending")
        before = len(provider.received)
        try:
            if workflow is None:
                await Runner.run(agent, mark, session=CtxStoreSession(mark, store))
            else:
                with workflow("soak", conversation_id=otel_key):
                    client.chat.completions.create(
                        model="gpt-4o", messages=[{"role": "user", "content": mark}]
                    )
            journal.note(
                kind=api, mark=mark, key=key, ok=True, made=len(provider.received) - before
            )
        except Exception as exc:  # noqa: BLE001 - noted: typed, or a defect
            # (the session stores the run's items: the application's own store use may fail)
            _failure(journal, exc, kind=api, mark=mark, key=key,
                     made=len(provider.received) - before)  # fmt: skip
        await asyncio.sleep(rng.uniform(0.0, 0.1))
    flushed = ctxstore.capture.flush(store, 120)
    s = ctxstore.capture.stats(store)
    journal.note(kind="stats", pid=os.getpid(), flushed=flushed, submitted=s.submitted, recorded=s.recorded,
                 dropped=s.dropped, failed=s.failed, last_error=s.last_error,
                 received=len(provider.received))  # fmt: skip
    store.close()
    provider.close()


def _instrumented(store: Any) -> Any:
    """The OpenAI client instrumented with ctxstore's completion hook; a workflow's maker
    (the conversation id it names is the key of the context its calls go to)."""
    from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.util.genai.handler import TelemetryHandler

    import ctxstore.capture

    tracer = TracerProvider()
    OpenAIInstrumentor().instrument(
        tracer_provider=tracer, completion_hook=ctxstore.capture.otel_hook(store)
    )
    return TelemetryHandler(tracer_provider=tracer).workflow


# ---- the projections' worker ------------------------------------------------------------


def worker(url: str, journal: Journal, name: str, seconds: float, seed: int, _: Path) -> None:
    """What `ctxstore serve` runs beside its routes (adapters/http/app.py `_refresh_audit`)."""
    store = opened(url, name)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            audit_at = store.admin.refresh_audit_index()
            search_at = store.admin.refresh_search_index()
            journal.note(kind="refresh", ok=True, audit=audit_at, search=search_at)
        except Exception as exc:  # noqa: BLE001 - noted: typed, or a defect
            _failure(journal, exc, kind="refresh")
        time.sleep(0.5)
    store.close()


# ---- the searcher ------------------------------------------------------------------------


def _recent_marks(journals: Path, sqlite: bool) -> list[str]:
    """Marks that writers of this store acknowledged lately (the journals' tails)."""
    found: list[str] = []
    for path in journals.glob("*.jsonl"):
        if ("lite" in path.name) != sqlite:
            continue
        with path.open("rb") as f:
            f.seek(max(path.stat().st_size - 8192, 0))
            for line in f.read().decode(errors="replace").splitlines()[1:]:
                try:
                    n = json.loads(line)
                except ValueError:
                    continue
                if n.get("ok") is True and n["kind"] in ("insert", "replace", "stream", "session"):
                    found.append(n["mark"])
    return found


def searcher(url: str, journal: Journal, name: str, seconds: float, seed: int,
             journals: Path) -> None:  # fmt: skip
    rng = random.Random(seed)
    store = opened(url, name)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        marks = _recent_marks(journals, url.startswith("sqlite"))
        if not marks:
            time.sleep(0.5)
            continue
        mark = rng.choice(marks)
        try:
            page = store.search(f'"{mark}"', include_hidden=rng.random() < 0.3)
            journal.note(kind="search", ok=True, mark=mark, hits=len(page.hits))
        except Exception as exc:  # noqa: BLE001 - noted: typed, or a defect
            _failure(journal, exc, kind="search", mark=mark)
        time.sleep(0.1)
    store.close()


# ---- the MCP client ----------------------------------------------------------------------


async def _mcp_session(url: str, journal: Journal, deadline: float, rng: random.Random,
                       journals: Path) -> None:  # fmt: skip
    from mcp.client import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    server = StdioServerParameters(command=sys.executable,
                                   args=["-m", "ctxstore", "--url", url, "mcp"])  # fmt: skip
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        journal.note(kind="connect", ok=True)
        while time.monotonic() < deadline:
            args: dict[str, Any] = {"limit": 20}
            tool = "list_contexts"
            listed = await session.call_tool(tool, args)
            _tool_note(journal, tool, listed)
            contexts = (listed.structured_content or {}).get("contexts") or []
            if contexts:
                tool, args = "read_context", {"context_id": rng.choice(contexts)["context_id"]}
                _tool_note(journal, tool, await session.call_tool(tool, args))
            marks = _recent_marks(journals, url.startswith("sqlite"))
            if marks:
                tool, args = "search", {"query": f'"{rng.choice(marks)}"'}
                _tool_note(journal, tool, await session.call_tool(tool, args))
            await asyncio.sleep(0.2)


def _tool_note(journal: Journal, tool: str, result: Any) -> None:
    if not result.is_error:
        journal.note(kind=tool, ok=True)
        return
    text = " ".join(getattr(c, "text", "") for c in result.content)[:200]
    # The SDK's answer to an exception that was not a CtxStoreError (its name alone, no
    # message): a defect.
    untyped = re.fullmatch(r"Error executing tool \w+", text.strip()) is not None
    journal.note(kind=tool, ok=False, **({"untyped": text} if untyped else {"error": text}))


def mcp_reader(url: str, journal: Journal, name: str, seconds: float, seed: int,
               journals: Path) -> None:  # fmt: skip
    rng = random.Random(seed)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            asyncio.run(_mcp_session(url, journal, deadline, rng, journals))
        except Exception as exc:  # noqa: BLE001 - the server went away: noted, started again
            journal.note(kind="connect", ok=False, error=repr(exc)[:300])
            time.sleep(1.0)


ROLES = {"capture": capture, "worker": worker, "searcher": searcher, "mcp": mcp_reader}


def main() -> None:
    role, url, journal, name, seconds, seed, journals = sys.argv[1:]
    ROLES[role](url, Journal(Path(journal)), name, float(seconds), int(seed), Path(journals))


if __name__ == "__main__":
    main()
