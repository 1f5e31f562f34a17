"""bench_peers' sections for the Claude Agent SDK and Google ADK integrations, and the
attachments target; each prints ratios measured in one run.

- claude: `CtxStoreSessionStore.append` per turn and a session's load through the SDK's
  own reader (`get_session_messages_from_store`), against the SDK's default persistence:
  the transcript as JSONL lines appended to a local file (as the CLI writes it) and read
  by `get_session_messages`.
- adk: `CtxStoreSessionService.append_event` per event and `get_session`, against ADK's
  `DatabaseSessionService` on the same database (SQLite file, PostgreSQL); adk_reads:
  `list_sessions` over 5,000 sessions and `get_session` of a 2,000-event session (whole,
  `num_recent_events`, `after_timestamp`), against the same service.
- blobs: a session repeating one 1 MB image in every turn; the bytes its blobs take.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import struct
import time
import uuid
import zlib
from pathlib import Path
from typing import Any

from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore


def ratio_line(label: str, ours: float, theirs: float, unit: str, name: str) -> str:
    return (
        f"  {label}: {ours:,.1f} {unit} (ctxstore) vs {theirs:,.1f} ({name}) = {ours / theirs:.2f}x"
    )


# ---- Claude Agent SDK -------------------------------------------------------------------


def claude_entries(
    conversation: list[list[dict[str, Any]]], session: str
) -> list[list[dict[str, Any]]]:
    """Each turn as the transcript entries the Claude CLI writes (a parentUuid chain)."""
    out, parent = [], None
    for turn in conversation:
        entries = []
        for m in turn:
            role = "user" if m["role"] in ("user", "tool") else "assistant"
            uid = str(uuid.uuid4())
            entries.append({
                "parentUuid": parent, "isSidechain": False, "type": role, "uuid": uid,
                "sessionId": session, "timestamp": "2026-11-25T00:00:00.000Z",
                "message": {"role": role, "content": [
                    {"type": "text", "text": m.get("content") or "(tool call)"}]},
            })  # fmt: skip
            parent = uid
        out.append(entries)
    return out


def claude(
    url: str, folder: Path, conversation: list[list[dict[str, Any]]], label: str,
    settings: Settings | None = None,
) -> None:  # fmt: skip
    """The session store's appends and loads beside the CLI's JSONL file (appended without
    fsync: it survives a killed process, not a power cut)."""
    from claude_agent_sdk._internal.sessions import (
        get_session_messages,
        get_session_messages_from_store,
        project_key_for_directory,
    )

    from ctxstore.adapters.integrations.claude_session_store import CtxStoreSessionStore

    os.environ["CLAUDE_CONFIG_DIR"] = str(folder / "claude")
    project = str(folder)
    key_name = project_key_for_directory(project)
    session = str(uuid.uuid4())
    batches = claude_entries(conversation, session)
    transcript = folder / "claude" / "projects" / key_name / f"{session}.jsonl"
    transcript.parent.mkdir(parents=True, exist_ok=True)
    with ContextStore.from_url(url, settings) as store:
        ours: Any = CtxStoreSessionStore(store)  # (the SDK's Protocol, duck-typed)
        key = {"project_key": key_name, "session_id": session}
        asyncio.run(ours.append({**key, "session_id": str(uuid.uuid4())}, batches[0][:1]))  # warm
        spent = [0.0, 0.0]

        async def drive() -> None:  # on one running loop, as the SDK calls a session store
            for entries in batches:  # taking turns: the machine's drift falls on both
                t = time.perf_counter()
                await ours.append(key, entries)
                spent[0] += time.perf_counter() - t
                t = time.perf_counter()
                with transcript.open("a", encoding="utf-8") as f:
                    f.write("".join(json.dumps(e, separators=(",", ":")) + "\n" for e in entries))
                spent[1] += time.perf_counter() - t

        asyncio.run(drive())
        count = sum(len(b) for b in batches)
        loads = [0.0, 0.0]
        for _ in range(5):
            t = time.perf_counter()
            mine = asyncio.run(get_session_messages_from_store(ours, session, directory=project))
            loads[0] += time.perf_counter() - t
            t = time.perf_counter()
            theirs = get_session_messages(session, directory=project)
            loads[1] += time.perf_counter() - t
        assert len(mine) == len(theirs) == count, (len(mine), len(theirs), count)
    print(f"\nClaude Agent SDK session store, {label} ({count} entries):")
    print(ratio_line("append", count / spent[0], count / spent[1], "entries/s", "local JSONL file"))
    print(ratio_line("load", 5 / loads[0], 5 / loads[1], "loads/s", "local JSONL file"))


# ---- Google ADK -----------------------------------------------------------------------------


def adk(url: str, adk_url: str, conversation: list[list[dict[str, Any]]], label: str) -> None:
    from google.adk.events.event import Event
    from google.adk.events.event_actions import EventActions
    from google.adk.sessions.database_session_service import DatabaseSessionService
    from google.genai import types

    from ctxstore.adapters.integrations.adk_session_service import CtxStoreSessionService

    def events() -> list[Any]:
        out = []
        for n, turn in enumerate(conversation):
            for m in turn:
                role = "user" if m["role"] in ("user", "tool") else "model"
                text = m.get("content") or "(tool call)"
                out.append(Event(author="user" if role == "user" else "agent",
                                 content=types.Content(role=role, parts=[types.Part(text=text)]),
                                 actions=EventActions(state_delta={"turn": n})))  # fmt: skip
        return out

    async def run(service: Any) -> tuple[float, float]:
        session = await service.create_session(app_name="bench", user_id="u")
        stream = events()
        t = time.perf_counter()
        for e in stream:
            await service.append_event(session, e)
        added = time.perf_counter() - t
        t = time.perf_counter()
        for _ in range(5):
            got = await service.get_session(app_name="bench", user_id="u", session_id=session.id)
            assert got is not None and len(got.events) == len(stream)
        return len(stream) / added, 5 / (time.perf_counter() - t)

    async def both(store: ContextStore) -> tuple[tuple[float, float], tuple[float, float]]:
        theirs_service = DatabaseSessionService(adk_url)
        try:
            ours = await run(CtxStoreSessionService(store))
            theirs = await run(theirs_service)
        finally:
            await theirs_service.close()
        return ours, theirs

    with ContextStore.from_url(url) as store:
        ours, theirs = asyncio.run(both(store))
    print(f"\nGoogle ADK session service, {label}:")
    print(ratio_line("append_event", ours[0], theirs[0], "events/s", "DatabaseSessionService"))
    print(ratio_line("get_session", ours[1], theirs[1], "loads/s", "DatabaseSessionService"))


def adk_reads(
    url: str, adk_url: str, label: str, sessions: int = 5000, events: int = 2000, rounds: int = 5
) -> None:
    """`list_sessions` over `sessions` sessions and `get_session` of an `events`-event one
    (whole, its last 20 events, the events after a time), ctxstore against ADK's
    `DatabaseSessionService`: alternating blocks, the median of `rounds`."""
    import statistics

    from google.adk.events.event import Event
    from google.adk.events.event_actions import EventActions
    from google.adk.sessions.base_session_service import GetSessionConfig
    from google.adk.sessions.database_session_service import DatabaseSessionService
    from google.genai import types

    from ctxstore.adapters.integrations.adk_session_service import CtxStoreSessionService

    async def fill(service: Any) -> tuple[str, float]:
        for n in range(sessions):
            await service.create_session(app_name="list", user_id=f"u{n % 50}",
                                         state={"n": n, "user:seen": n % 7})  # fmt: skip
        long = await service.create_session(app_name="long", user_id="u")
        for n in range(events):
            role = "user" if n % 2 == 0 else "model"
            await service.append_event(long, Event(
                author="user" if role == "user" else "agent", timestamp=1_000_000.0 + n,
                content=types.Content(role=role, parts=[types.Part(text=f"message {n} " * 8)]),
                actions=EventActions(state_delta={"turn": n})))  # fmt: skip
        return long.id, 1_000_000.0 + events * 0.9

    async def once(service: Any, what: str, sid: str, after: float) -> float:
        t = time.perf_counter()
        if what == "list":
            got: Any = await service.list_sessions(app_name="list")
            assert len(got.sessions) == sessions, len(got.sessions)
        else:
            config = {"whole": None, "recent": GetSessionConfig(num_recent_events=20),
                      "after": GetSessionConfig(after_timestamp=after)}[what]  # fmt: skip
            got = await service.get_session(app_name="long", user_id="u", session_id=sid,
                                            config=config)  # fmt: skip
            want = {"whole": events, "recent": 20, "after": events - int(events * 0.9)}[what]
            assert got is not None and len(got.events) == want, (what, len(got.events))
        return time.perf_counter() - t

    async def both(store: ContextStore) -> dict[str, tuple[float, float]]:
        theirs = DatabaseSessionService(adk_url)
        ours = CtxStoreSessionService(store)
        try:
            t = time.perf_counter()
            mine = await fill(ours)
            print(f"  (filled: ctxstore {time.perf_counter() - t:.0f} s", end="")
            t = time.perf_counter()
            other = await fill(theirs)
            print(f", DatabaseSessionService {time.perf_counter() - t:.0f} s)")
            out = {}
            for what in ("list", "whole", "recent", "after"):
                spent: list[list[float]] = [[], []]
                for _ in range(rounds):  # alternating blocks: the machine's drift falls on both
                    spent[0].append(await once(ours, what, *mine))
                    spent[1].append(await once(theirs, what, *other))
                out[what] = (statistics.median(spent[0]), statistics.median(spent[1]))
            return out
        finally:
            await theirs.close()

    print(f"\nGoogle ADK session service reads, {label}:")
    with ContextStore.from_url(url) as store:
        medians = asyncio.run(both(store))
    names = {"list": f"list_sessions ({sessions:,} sessions)",
             "whole": f"get_session ({events:,} events)",
             "recent": "get_session (num_recent_events=20)",
             "after": "get_session (after_timestamp: the last 10%)"}  # fmt: skip
    for what, (ours_s, theirs_s) in medians.items():
        print(
            ratio_line(names[what], 1 / ours_s, 1 / theirs_s, "calls/s", "DatabaseSessionService")
        )


# ---- attachments ------------------------------------------------------------------------------


def png_of_size(size: int) -> bytes:
    """A PNG of random pixels about `size` bytes long (random bytes do not compress)."""
    side = int((size / 3) ** 0.5)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    rows = b"".join(b"\x00" + os.urandom(side * 3) for _ in range(side))
    header = struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows, 1))
            + chunk(b"IEND", b""))  # fmt: skip


def blobs(url: str, label: str, turns: int = 500, size: int = 1_000_000) -> None:
    image = png_of_size(size)
    url_data = "data:image/png;base64," + base64.b64encode(image).decode()
    with ContextStore.from_url(url) as store:
        cid = store.create()
        t = time.perf_counter()
        for n in range(turns):
            store.insert(cid, [
                {"role": "user", "content": [{"type": "text", "text": f"turn {n}: and now?"},
                                             {"type": "image_url", "image_url": {"url": url_data}}]},
                {"role": "assistant", "content": f"answer {n}"}])  # fmt: skip
        spent = time.perf_counter() - t
        stored = store._storage.blobs.stored_bytes()
        tokens = store.visible(cid).tokens
    given = turns * len(image)
    print(
        f"\nAttachments, {label}: {turns} turns each with the same {len(image) / 1e6:.2f} MB image"
    )
    print(f"  blobs stored: {stored / 1e6:.2f} MB (target < 2 MB) of {given / 1e6:,.0f} MB sent; "
          f"{turns / spent:,.0f} turns/s; the context costs {tokens:,} tokens")  # fmt: skip
