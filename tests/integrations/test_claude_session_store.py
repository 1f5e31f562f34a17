"""The Claude Agent SDK's own SessionStore conformance suite, no optional method skipped,
on SQLite and PostgreSQL; entries kept exactly, readable as Anthropic messages."""

from __future__ import annotations

import asyncio
import uuid

import pytest

pytest.importorskip("claude_agent_sdk")  # (a test dependency: see pyproject's test extra)

from claude_agent_sdk.testing import run_session_store_conformance

from ctxstore.adapters.integrations.claude_session_store import CtxStoreSessionStore
from ctxstore.adapters.store.facade import ContextStore


def test_the_sdks_conformance_suite_passes(durable_url):
    with ContextStore.from_url(durable_url) as store:

        def fresh() -> CtxStoreSessionStore:
            # One prefix per contract: each sees an empty store (the SDK's isolation).
            return CtxStoreSessionStore(store, key_prefix=f"claude-{uuid.uuid4().hex[:8]}:")

        asyncio.run(run_session_store_conformance(fresh))


def test_entries_read_back_exactly_and_as_anthropic_messages(durable_url):
    entries = [
        {"type": "summary", "summary": "Weather chat", "leafUuid": "u2"},
        {"type": "user", "uuid": "u1", "sessionId": "s", "message": {
            "role": "user", "content": "Weather in Paris?"}, "timestamp": "2026-01-01T00:00:00Z"},
        {"parentUuid": "u1", "type": "assistant", "uuid": "u2", "message": {
            "role": "assistant", "content": [
                {"type": "thinking", "thinking": "tool", "signature": "sig"},
                {"type": "tool_use", "id": "toolu_1", "name": "w", "input": {"city": "Paris"}}]}},
    ]  # fmt: skip
    key = {"project_key": "proj", "session_id": "s"}
    with ContextStore.from_url(durable_url) as store:
        sessions = CtxStoreSessionStore(store)
        asyncio.run(sessions.append(key, entries))
        asyncio.run(sessions.append(key, entries[1:]))  # a retry: the uuids make it a no-op
        loaded = asyncio.run(sessions.load(key))
        assert loaded == entries
        assert [list(e) for e in loaded] == [list(e) for e in entries]  # key order too
        cid = sessions._id(key)
        claude = store.visible(cid).to_anthropic()
        assert claude["messages"] == [entries[1]["message"], entries[2]["message"]]
        sub = {**key, "subpath": "subagents/agent-1"}
        asyncio.run(sessions.append(sub, [entries[1]]))
        created = store.history(sessions._id(sub), types=["create"])[0]
        assert created.details["metadata"]["claude_session"]["parent"] == str(cid)
