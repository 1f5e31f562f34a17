"""Claude Agent SDK: the assistant entries a transcript holds, appended through the session
store, are listed by `calls` as model calls reconstructed from the transcript, with their
usage, recorded in the append's own commit (SQLite and PostgreSQL, sync and async)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import pytest

pytest.importorskip("claude_agent_sdk")  # (a test dependency: see pyproject's test extra)

import ctxstore.capture
from ctxstore.adapters.integrations.claude_session_store import CtxStoreSessionStore
from ctxstore.adapters.store.async_store import AsyncContextStore
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.adapters.store.parts import parts_of

from ..conftest import surface_over

KEY = {"project_key": "proj", "session_id": "s"}


@pytest.fixture(params=["sync", "async", "http"])
def over(request: pytest.FixtureRequest) -> Iterator[Callable[[ContextStore], Any]]:
    """The store as a surface: itself, the async store, a tenant's HTTP client."""
    with ExitStack() as stack:

        def wrap(store: ContextStore) -> Any:
            if request.param == "sync":
                return store
            if request.param == "async":
                return AsyncContextStore(store, parts_of(store).storage.async_events())
            return stack.enter_context(surface_over("http", store))

        yield wrap


def user(n: int, text: str) -> dict[str, Any]:
    return {"type": "user", "uuid": f"u{n}", "message": {"role": "user", "content": text}}


def assistant(n: int, blocks: list[Any], *, msg: str, tokens: int = 100,
              model: str = "claude-sonnet-4-5") -> dict[str, Any]:  # fmt: skip
    return {"type": "assistant", "uuid": f"a{n}", "requestId": f"req_{msg}", "message": {
        "id": msg, "type": "message", "role": "assistant", "model": model, "content": blocks,
        "stop_reason": "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": tokens, "cache_read_input_tokens": 50, "output_tokens": 9}}}  # fmt: skip


def listed(store: Any, cid: Any, count: int) -> Any:
    """The context's calls, once the audit index lists `count` (on PostgreSQL it lists a
    commit once no older transaction of the server is still open: a busy server lags)."""
    deadline = time.monotonic() + 30
    while len(found := store.calls(cid)) < count and time.monotonic() < deadline:
        time.sleep(0.2)
    return found


def test_assistant_entries_are_listed_as_reconstructed_calls_with_their_usage(
    durable_url: str, over: Any
) -> None:
    tool = {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"path": "a.py"}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "print(1)"}
    first = [
        {"type": "summary", "summary": "Reading a file", "leafUuid": "a2"},
        user(1, "What does a.py print?"),
        # One reply written as two entries (one per content block) sharing its id: one call.
        assistant(1, [{"type": "text", "text": "Let me look."}], msg="msg_1"),
        assistant(2, [tool], msg="msg_1"),
    ]  # fmt: skip
    second = [
        {"type": "user", "uuid": "u2", "message": {"role": "user", "content": [result]}},
        assistant(3, [{"type": "text", "text": "It prints 1."}], msg="msg_2", tokens=140),
        # not a model call: the CLI's own note of an interruption
        assistant(
            4, [{"type": "text", "text": "[Request interrupted]"}], msg="x", model="<synthetic>"
        ),
    ]
    with ContextStore.from_url(durable_url) as store:
        sessions = CtxStoreSessionStore(over(store))
        asyncio.run(sessions.append(KEY, first))
        cid = sessions._id(KEY)
        assert cid is not None
        before = store.visible(cid).version
        asyncio.run(sessions.append(KEY, second))
        asyncio.run(sessions.append(KEY, second))  # a retry: the uuids make it a no-op
        assert ctxstore.capture.flush(store, 10)  # (nothing queued: recorded with the append)
        assert asyncio.run(sessions.load(KEY)) == first + second  # the entries kept exactly

        calls = listed(store, cid, 2)
        assert len(calls) == 2
        for c in calls:
            assert c.source == "claude-transcript" and c.reconstructed and not c.failed
            assert c.api == "anthropic.messages" and c.model == "claude-sonnet-4-5"
            assert c.whole_context  # what was sent is its version: no copy, no list of ids
        assert [(c.prompt_tokens, c.completion_tokens) for c in calls] == [(150, 9), (190, 9)]

        one, two = store.call(cid, 1), store.call(cid, 2)
        assert one.response_body is not None
        assert one.response_body["content"] == [{"type": "text", "text": "Let me look."}, tool]
        assert one.response is not None and one.response[0].role == "assistant"
        # what was sent: the transcript before the reply (no system prompt, no tools)
        assert [m.role for m in one.messages or []][-1] == "user"
        assert [m.role for m in two.messages or []][-3:] == ["assistant", "assistant", "tool"]
        assert two.request is not None and "system prompt and the tools" in two.request["note"]
        assert "tools" not in two.request and "system" not in two.request

        # the second append is one commit: its entries and its call in one command
        written = [h for h in store.history(cid) if h.version > before]
        assert {h.command_id for h in written} != {None}
        assert len({h.command_id for h in written}) == 1
        # the entries before the reply, the reply on, then its call (made with the first)
        assert [h.type for h in written] == ["insert", "insert", "usage"]


def test_a_transcript_without_usage_records_no_calls(durable_url: str) -> None:
    with ContextStore.from_url(durable_url) as store:
        sessions = CtxStoreSessionStore(store)
        entries = [user(1, "hi"), {"type": "assistant", "uuid": "a1",
                                   "message": {"role": "assistant", "content": "hello"}}]  # fmt: skip
        asyncio.run(sessions.append(KEY, entries))
        cid = sessions._id(KEY)
        assert cid is not None
        assert store.calls(cid) == []
        assert asyncio.run(sessions.load(KEY)) == entries
