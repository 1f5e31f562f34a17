"""The Claude Agent SDK's own SessionStore conformance suite, no optional method skipped,
on SQLite and PostgreSQL; entries kept exactly, readable as Anthropic messages."""

from __future__ import annotations

import asyncio
import uuid

import pytest

pytest.importorskip("claude_agent_sdk")  # (a test dependency: see pyproject's test extra)

from claude_agent_sdk.testing import run_session_store_conformance

from ctxstore.adapters.integrations.claude_session_store import CtxStoreSessionStore
from ctxstore.adapters.store.async_store import AsyncContextStore
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.adapters.store.parts import parts_of

from ..conftest import SURFACES, surface_over


@pytest.fixture(params=["sync", "async"])
def over(request: pytest.FixtureRequest):
    """The store as the session store takes it: the sync one, or an async one over it
    (appends awaited on the loop; the same storage and cache)."""

    def wrap(store: ContextStore):
        if request.param == "sync":
            return store
        return AsyncContextStore(store, parts_of(store).storage.async_events())

    return wrap


@pytest.mark.parametrize("surface", SURFACES)
def test_the_sdks_conformance_suite_passes(durable_url, surface):
    """On the store, the async store and a tenant's HTTP client (the service scopes a
    key's context to the token's tenant: the session store never derives ids itself)."""
    with ContextStore.from_url(durable_url) as store, surface_over(surface, store) as given:

        def fresh() -> CtxStoreSessionStore:
            # One prefix per contract: each sees an empty store (the SDK's isolation).
            return CtxStoreSessionStore(given, key_prefix=f"claude-{uuid.uuid4().hex[:8]}:")

        asyncio.run(run_session_store_conformance(fresh))


def test_listing_pages_past_one_request(durable_url, monkeypatch):
    """More sessions than one page: list_sessions and delete page with `after`."""
    from ctxstore.adapters.integrations import surface

    monkeypatch.setattr(surface, "PAGE", 3)
    with ContextStore.from_url(durable_url) as store, surface_over("http", store) as client:
        sessions = CtxStoreSessionStore(client)
        for n in range(8):
            key = {"project_key": "p", "session_id": f"s{n}"}
            asyncio.run(sessions.append(key, [{"type": "user", "uuid": f"u{n}"}]))
        listed = asyncio.run(sessions.list_sessions("p"))
        assert sorted(s["session_id"] for s in listed) == [f"s{n}" for n in range(8)]
        asyncio.run(sessions.delete({"project_key": "p", "session_id": "s7"}))
        assert len(asyncio.run(sessions.list_sessions("p"))) == 7


def test_entries_read_back_exactly_and_as_anthropic_messages(durable_url, over):
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
        sessions = CtxStoreSessionStore(over(store))
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


def _entry(n: int) -> dict:
    """A user entry of uuid u<n>."""
    return {"type": "user", "uuid": f"u{n}", "message": {"role": "user", "content": f"{n}"}}


def test_two_stores_appending_to_one_transcript_lose_and_repeat_nothing(durable_url, over):
    """Each instance remembers the uuids it wrote; another's write in between makes its
    next append read the transcript again (the insert is conditional on the version)."""
    key = {"project_key": "proj", "session_id": "shared"}

    with ContextStore.from_url(durable_url) as store, ContextStore.from_url(durable_url) as other:
        one, two = CtxStoreSessionStore(over(store)), CtxStoreSessionStore(over(other))
        asyncio.run(one.append(key, [_entry(1)]))
        asyncio.run(two.append(key, [_entry(1), _entry(2)]))  # u1 is there: only u2
        asyncio.run(one.append(key, [_entry(2), _entry(3)]))  # one's memory is stale: re-read
        asyncio.run(two.append(key, [_entry(3)]))
        assert [e["uuid"] for e in asyncio.run(one.load(key))] == ["u1", "u2", "u3"]
        asyncio.run(one.delete(key))
        asyncio.run(one.append(key, [_entry(1)]))  # a new transcript under the same key
        assert [e["uuid"] for e in asyncio.run(one.load(key))] == ["u1"]


def test_an_entry_appended_again_after_another_instance_wrote_the_transcript_anew_is_kept(
    durable_url, over
):
    """Another instance deletes the transcript and writes it again up to the version this
    one remembers: an entry this one wrote before, appended again, is not in the new
    transcript and is stored (it was taken for a retry of the erased one's, and lost)."""
    key = {"project_key": "proj", "session_id": "again"}

    with ContextStore.from_url(durable_url) as store, ContextStore.from_url(durable_url) as other:
        one, two = CtxStoreSessionStore(over(store)), CtxStoreSessionStore(over(other))
        asyncio.run(one.append(key, [_entry(1)]))
        cid = store.lookup_key(one._name(key))
        assert cid is not None
        version = store.visible(cid).version
        asyncio.run(two.delete(key))
        asyncio.run(two.append(key, [_entry(9)]))
        assert other.visible(cid).version == version  # the same id, up to the same version
        asyncio.run(one.append(key, [_entry(1), _entry(2)]))
        assert [e["uuid"] for e in asyncio.run(two.load(key))] == ["u9", "u1", "u2"]
        asyncio.run(one.append(key, [_entry(2)]))  # a retry: still a no-op
        assert [e["uuid"] for e in asyncio.run(one.load(key))] == ["u9", "u1", "u2"]


def test_an_append_is_one_commit_and_summaries_are_the_sdks_fold(durable_url, over):
    """Each append writes one event to one context (no summary write beside it); the
    summaries listed are the SDK's fold over everything appended, stamped with the
    transcript's mtime, also after more is appended."""
    from claude_agent_sdk._internal.session_summary import fold_session_summary

    def turn(n: int) -> dict:
        return {"type": "user", "uuid": f"u{n}", "timestamp": f"2026-01-0{n + 1}T00:00:00Z",
                "cwd": "/work", "message": {"role": "user", "content": f"question {n}"}}  # fmt: skip

    with ContextStore.from_url(durable_url) as store:
        sessions = CtxStoreSessionStore(over(store))
        key = {"project_key": "p", "session_id": "s"}
        asyncio.run(sessions.append(key, [turn(0)]))
        cid = store.lookup_key(sessions._name(key))
        assert cid is not None
        events = len(store.audit(limit=1000).entries)
        for n in (1, 2):
            asyncio.run(sessions.append(key, [turn(n)]))
            assert len(store.audit(limit=1000).entries) == events + n  # one event each
        assert len(store.contexts()) == 1
        for more in (3, 4):
            listed = asyncio.run(sessions.list_session_summaries("p"))
            mtime = asyncio.run(sessions.list_sessions("p"))[0]["mtime"]
            expected = dict(fold_session_summary(None, key, [turn(n) for n in range(more)]))
            assert listed == [{**expected, "mtime": mtime}]
            asyncio.run(sessions.append(key, [turn(more)]))


def test_a_summary_follows_a_session_deleted_and_made_again_by_another_instance(durable_url):
    """The summary is folded on from the last entry this instance folded; a transcript
    without that entry (deleted and written again elsewhere) is folded from its start."""
    from claude_agent_sdk._internal.session_summary import fold_session_summary

    def turn(n: int, text: str) -> dict:
        return {"type": "user", "uuid": f"u{n}", "timestamp": f"2026-01-0{n + 1}T00:00:00Z",
                "cwd": f"/{text}", "message": {"role": "user", "content": text}}  # fmt: skip

    with ContextStore.from_url(durable_url) as store:
        mine, theirs = CtxStoreSessionStore(store), CtxStoreSessionStore(store)
        key = {"project_key": "p", "session_id": "s"}
        asyncio.run(mine.append(key, [turn(0, "before")]))
        assert asyncio.run(mine.list_session_summaries("p"))[0]["data"]
        asyncio.run(theirs.delete(key))
        again = [turn(n, f"after{n}") for n in range(3)]
        asyncio.run(theirs.append(key, again))
        listed = asyncio.run(mine.list_session_summaries("p"))
        mtime = asyncio.run(mine.list_sessions("p"))[0]["mtime"]
        assert listed == [{**dict(fold_session_summary(None, key, again)), "mtime": mtime}]
