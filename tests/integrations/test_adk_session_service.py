"""Google ADK's session-service contract, on SQLite and PostgreSQL.

google-adk's source distribution ships no tests, so the cases of ADK's own session-service
suite (tests/unittests/sessions/test_session_service.py in its repository: the tests that
every backend takes through its `session_service` fixture) are ported here, each named
after the case it ports. Each also runs against ADK's own SqliteSessionService, so a case
ported wrongly fails there too. Then what ctxstore adds: the context reads as the
conversation, a retried append is a no-op, and a Runner with a scripted model works on it.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncGenerator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("google.adk")  # (a test dependency: see pyproject's test extra)

from google.adk.agents import LlmAgent
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions.base_session_service import BaseSessionService, GetSessionConfig
from google.adk.sessions.sqlite_session_service import SqliteSessionService
from google.genai import types

from ctxstore.adapters.integrations.adk_session_service import CtxStoreSessionService
from ctxstore.adapters.store.facade import ContextStore

from ..conftest import make_url, surface_over

APP, USER = "my_app", "test_user"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres),
                        "sqlite-async", pytest.param("postgres-async", marks=pytest.mark.postgres),
                        "sqlite-http", pytest.param("postgres-http", marks=pytest.mark.postgres),
                        "adk-sqlite"])  # fmt: skip
def service(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseSessionService]:
    """ctxstore's service on every durable backend and surface (the store, an async one
    over it: events appended on the loop, a tenant's HTTP client), and ADK's own as the
    reference."""
    if request.param == "adk-sqlite":
        yield SqliteSessionService(str(tmp_path / "adk.db"))
        return
    backend, _, mode = request.param.partition("-")
    with (
        ContextStore.from_url(make_url(backend, tmp_path, request)) as store,
        surface_over({"": "store"}.get(mode, mode), store) as given,
    ):
        yield CtxStoreSessionService(given)


@pytest.fixture
def ours(durable_url: str) -> Iterator[CtxStoreSessionService]:
    with ContextStore.from_url(durable_url) as store:
        yield CtxStoreSessionService(store)


def run(step: Callable[[], Any]) -> Any:
    return asyncio.run(step())


def delta(**state: Any) -> EventActions:
    return EventActions(state_delta=state)


# ---- ADK's cases ---------------------------------------------------------------------------


def test_get_empty_session(service: BaseSessionService) -> None:
    assert run(lambda: service.get_session(app_name=APP, user_id=USER, session_id="123")) is None


def test_create_get_session(service: BaseSessionService) -> None:
    async def case() -> None:
        session = await service.create_session(app_name=APP, user_id=USER, state={"key": "value"})
        assert (session.app_name, session.user_id, session.state) == (APP, USER, {"key": "value"})
        assert session.id and session.last_update_time <= time.time()
        got = await service.get_session(app_name=APP, user_id=USER, session_id=session.id)
        assert got == session
        await service.delete_session(app_name=APP, user_id=USER, session_id=session.id)
        assert await service.get_session(app_name=APP, user_id=USER, session_id=session.id) is None

    run(case)


def test_create_and_list_sessions(service: BaseSessionService) -> None:
    async def case() -> None:
        ids = [f"session{i}" for i in range(5)]
        for sid in ids:
            await service.create_session(
                app_name=APP, user_id=USER, session_id=sid, state={"key": "value" + sid}
            )
        listed = (await service.list_sessions(app_name=APP, user_id=USER)).sessions
        assert sorted(s.id for s in listed) == ids
        assert all(s.state == {"key": "value" + s.id} and not s.events for s in listed)

    run(case)


def test_list_sessions_all_users(service: BaseSessionService) -> None:
    async def case() -> None:
        for user, sid in [("user1", "session1a"), ("user1", "session1b"), ("user2", "session2a")]:
            await service.create_session(
                app_name=APP, user_id=user, session_id=sid, state={"key": "value" + sid[-2:]}
            )
        await service.create_session(app_name="other_app", user_id="user1", session_id="x")
        one = (await service.list_sessions(app_name=APP, user_id="user1")).sessions
        assert {s.id: s.state for s in one} == {
            "session1a": {"key": "value1a"}, "session1b": {"key": "value1b"}}  # fmt: skip
        two = (await service.list_sessions(app_name=APP, user_id="user2")).sessions
        assert [(s.id, s.state) for s in two] == [("session2a", {"key": "value2a"})]
        every = (await service.list_sessions(app_name=APP, user_id=None)).sessions
        assert {(s.user_id, s.id) for s in every} == {
            ("user1", "session1a"), ("user1", "session1b"), ("user2", "session2a")}  # fmt: skip

    run(case)


def test_app_state_is_shared_by_all_users_of_app(service: BaseSessionService) -> None:
    async def case() -> None:
        s1 = await service.create_session(
            app_name=APP, user_id="u1", session_id="s1", state={"app:k1": "v1"}
        )
        await service.append_event(s1, Event(invocation_id="inv1", author="user",
                                             actions=delta(**{"app:k2": "v2"})))  # fmt: skip
        s2 = await service.create_session(app_name=APP, user_id="u2", session_id="s2")
        assert s2.state == {"app:k1": "v1", "app:k2": "v2"}
        again = await service.get_session(app_name=APP, user_id="u1", session_id="s1")
        assert again is not None and again.state == {"app:k1": "v1", "app:k2": "v2"}

    run(case)


def test_user_state_is_shared_only_by_user_sessions(service: BaseSessionService) -> None:
    async def case() -> None:
        s1 = await service.create_session(
            app_name=APP, user_id="u1", session_id="s1", state={"user:k1": "v1"}
        )
        await service.append_event(s1, Event(invocation_id="inv1", author="user",
                                             actions=delta(**{"user:k2": "v2"})))  # fmt: skip
        s1b = await service.create_session(app_name=APP, user_id="u1", session_id="s1b")
        assert s1b.state == {"user:k1": "v1", "user:k2": "v2"}
        s2 = await service.create_session(app_name=APP, user_id="u2", session_id="s2")
        assert s2.state == {}
        assert await service.get_user_state(app_name=APP, user_id="u1") == {"k1": "v1", "k2": "v2"}
        assert await service.get_user_state(app_name=APP, user_id="u2") == {}

    run(case)


def test_session_state_is_not_shared(service: BaseSessionService) -> None:
    async def case() -> None:
        s1 = await service.create_session(
            app_name=APP, user_id="u1", session_id="s1", state={"sk1": "v1"}
        )
        await service.append_event(s1, Event(invocation_id="inv1", author="user",
                                             actions=delta(sk2="v2")))  # fmt: skip
        got = await service.get_session(app_name=APP, user_id="u1", session_id="s1")
        assert got is not None and got.state == {"sk1": "v1", "sk2": "v2"}
        s1b = await service.create_session(app_name=APP, user_id="u1", session_id="s1b")
        assert s1b.state == {}

    run(case)


def test_temp_state_is_not_persisted_in_state_or_events(service: BaseSessionService) -> None:
    async def case() -> None:
        session = await service.create_session(app_name=APP, user_id="u1", session_id="s1")
        event = Event(invocation_id="inv1", author="user",
                      actions=delta(**{"temp:k1": "v1", "sk": "v2"}))  # fmt: skip
        await service.append_event(session, event)
        # the invocation's own session sees the temp key (a SequentialAgent's next agent)
        assert session.state == {"temp:k1": "v1", "sk": "v2"}
        assert event.actions.state_delta == {"sk": "v2"}
        got = await service.get_session(app_name=APP, user_id="u1", session_id="s1")
        assert got is not None and got.state == {"sk": "v2"}
        assert got.events[0].actions.state_delta == {"sk": "v2"}

    run(case)


def test_get_session_respects_user_id(service: BaseSessionService) -> None:
    async def case() -> None:
        s1 = await service.create_session(app_name=APP, user_id="u1", session_id="s1")
        await service.append_event(s1, Event(invocation_id="inv1", author="user"))
        await service.create_session(app_name=APP, user_id="u2", session_id="s1")
        got = await service.get_session(app_name=APP, user_id="u2", session_id="s1")
        assert got is not None and got.user_id == "u2" and got.events == []

    run(case)


def test_create_session_with_existing_id_raises_error(service: BaseSessionService) -> None:
    async def case() -> None:
        await service.create_session(app_name=APP, user_id=USER, session_id="existing")
        with pytest.raises(AlreadyExistsError):
            await service.create_session(app_name=APP, user_id=USER, session_id="existing")

    run(case)


def test_append_event_bytes(service: BaseSessionService) -> None:
    async def case() -> None:
        session = await service.create_session(app_name=APP, user_id=USER)
        content = types.Content(role="user", parts=[
            types.Part.from_bytes(data=b"test_image_data\x00\xff", mime_type="image/png")])  # fmt: skip
        grounding = types.GroundingMetadata(
            search_entry_point=types.SearchEntryPoint(sdk_blob=b"test_sdk_blob")
        )
        event = Event(invocation_id="invocation", author="user", content=content,
                      grounding_metadata=grounding)  # fmt: skip
        await service.append_event(session, event)
        got = await service.get_session(app_name=APP, user_id=USER, session_id=session.id)
        assert got is not None and len(got.events) == 1
        assert got.events[0].content == content
        assert got.events[0].grounding_metadata == grounding

    run(case)


def test_append_event_complete(service: BaseSessionService) -> None:
    async def case() -> None:
        session = await service.create_session(app_name=APP, user_id=USER)
        event = Event(
            invocation_id="invocation", author="user",
            content=types.Content(role="user", parts=[types.Part(text="test_text")]),
            turn_complete=True, partial=False,
            actions=EventActions(artifact_delta={"file": 0}, transfer_to_agent="agent",
                                 escalate=True),
            long_running_tool_ids={"tool1"}, error_code="error_code",
            error_message="error_message", interrupted=True,
            grounding_metadata=types.GroundingMetadata(web_search_queries=["query1"]),
            usage_metadata=types.GenerateContentResponseUsageMetadata(
                prompt_token_count=1, candidates_token_count=1, total_token_count=2),
            citation_metadata=types.CitationMetadata(),
            custom_metadata={"custom_key": "custom_value"}, timestamp=1700000000.123,
            input_transcription=types.Transcription(text="input", finished=True),
            output_transcription=types.Transcription(text="output", finished=True),
        )  # fmt: skip
        await service.append_event(session, event)
        got = await service.get_session(app_name=APP, user_id=USER, session_id=session.id)
        assert got == session

    run(case)


def test_session_last_update_time_updates_on_event(service: BaseSessionService) -> None:
    async def case() -> None:
        session = await service.create_session(app_name=APP, user_id=USER)
        original = session.last_update_time
        event = Event(invocation_id="invocation", author="user", timestamp=original + 10)
        await service.append_event(session, event)
        assert session.last_update_time == pytest.approx(original + 10, abs=1e-6)
        got = await service.get_session(app_name=APP, user_id=USER, session_id=session.id)
        assert got is not None
        assert got.last_update_time == pytest.approx(original + 10, abs=1e-6)

    run(case)


def test_append_event_to_stale_session(service: BaseSessionService) -> None:
    async def case() -> None:
        now = time.time()
        original = await service.create_session(app_name=APP, user_id=USER)
        await service.append_event(original, Event(invocation_id="inv1", author="user",
                                                   timestamp=now + 1, actions=delta(sk1="v1")))  # fmt: skip
        updated = await service.get_session(app_name=APP, user_id=USER, session_id=original.id)
        assert updated is not None
        await service.append_event(updated, Event(invocation_id="inv2", author="user",
                                                  timestamp=now + 2, actions=delta(sk2="v2")))  # fmt: skip
        assert original.last_update_time < updated.last_update_time
        with pytest.raises(ValueError, match="modified in storage|stale session"):
            await service.append_event(original, Event(
                invocation_id="inv3", author="user", timestamp=now + 3, actions=delta(sk3="v3")))  # fmt: skip
        final = await service.get_session(app_name=APP, user_id=USER, session_id=original.id)
        assert final is not None and [e.invocation_id for e in final.events] == ["inv1", "inv2"]
        assert final.state == {"sk1": "v1", "sk2": "v2"}

    run(case)


def test_append_event_allows_markerless_current_session(ours: CtxStoreSessionService) -> None:
    """(A case ADK holds its database service to; its SQLite service has no markers.)"""
    service = ours

    async def case() -> None:
        session = await service.create_session(app_name=APP, user_id=USER, session_id="s1")
        first = Event(invocation_id="inv1", author="user", timestamp=session.last_update_time + 10)
        await service.append_event(session, first)
        session._storage_update_marker = None  # a session built by hand, not read from here
        session.last_update_time -= 0.0001
        await service.append_event(session, Event(invocation_id="inv2", author="user",
                                                  timestamp=first.timestamp + 10))  # fmt: skip
        got = await service.get_session(app_name=APP, user_id=USER, session_id="s1")
        assert got is not None and [e.invocation_id for e in got.events] == ["inv1", "inv2"]

    run(case)


def test_get_session_with_config(service: BaseSessionService) -> None:
    async def case() -> None:
        session = await service.create_session(app_name=APP, user_id=USER)

        async def get(**config: Any) -> list[float]:
            got = await service.get_session(app_name=APP, user_id=USER, session_id=session.id,
                                            config=GetSessionConfig(**config) if config else None)  # fmt: skip
            assert got is not None
            return [e.timestamp for e in got.events]

        for i in range(1, 6):
            await service.append_event(session, Event(author="user", timestamp=i))
        assert await get() == [1, 2, 3, 4, 5]
        assert await get(num_recent_events=0) == []
        assert await get(num_recent_events=3) == [3, 4, 5]
        assert await get(after_timestamp=4.0) == [4, 5]
        assert await get(after_timestamp=50) == []
        assert await get(after_timestamp=4.0, num_recent_events=3) == [4, 5]

    run(case)


def test_partial_events_are_not_persisted(service: BaseSessionService) -> None:
    async def case() -> None:
        session = await service.create_session(app_name=APP, user_id=USER)
        await service.append_event(session, Event(author="user", partial=True))
        assert session.events == []
        got = await service.get_session(app_name=APP, user_id=USER, session_id=session.id)
        assert got is not None and got.events == []

    run(case)


def test_list_sessions_ordered_by_last_update_time(service: BaseSessionService) -> None:
    async def case() -> None:
        made = {}
        for sid in ("a", "b", "c"):
            made[sid] = await service.create_session(app_name=APP, user_id=USER, session_id=sid)
        later = time.time() + 100
        await service.append_event(made["a"], Event(author="user", timestamp=later))
        listed = (await service.list_sessions(app_name=APP, user_id=USER)).sessions
        assert [s.id for s in listed] == ["b", "c", "a"]

    run(case)


def test_listed_sessions_carry_the_state_and_time_get_session_reads(
    service: BaseSessionService,
) -> None:
    """A listed session (no events) has the state its events left, merged with the app's
    and the user's, and the last event's time: what get_session reads."""

    async def case() -> None:
        for user, sid in [("u1", "a"), ("u1", "b"), ("u2", "c")]:
            made = await service.create_session(
                app_name=APP, user_id=user, session_id=sid, state={"k": sid, "app:shared": 0}
            )
            for n in range(3):
                await service.append_event(made, Event(
                    author="user", timestamp=time.time() + n,
                    actions=delta(**{"turn": n, f"user:{user}": n, "app:shared": sid})))  # fmt: skip
        listed = (await service.list_sessions(app_name=APP)).sessions
        assert [s.id for s in listed] == ["a", "b", "c"]
        for s in listed:
            got = await service.get_session(app_name=APP, user_id=s.user_id, session_id=s.id)
            assert got is not None and not s.events and len(got.events) == 3
            assert s.state == got.state and s.state["app:shared"] == "c"
            assert s.last_update_time == got.last_update_time == got.events[-1].timestamp

    run(case)


def test_padded_session_id_reads_and_deletes(service: BaseSessionService) -> None:
    async def case() -> None:
        made = await service.create_session(app_name=APP, user_id=USER, session_id="  s1 ")
        assert made.id == "s1"
        got = await service.get_session(app_name=APP, user_id=USER, session_id=" s1 ")
        assert got is not None and got.id == "s1"
        with pytest.raises(AlreadyExistsError):
            await service.create_session(app_name=APP, user_id=USER, session_id="s1  ")
        await service.delete_session(app_name=APP, user_id=USER, session_id=" s1")
        assert await service.get_session(app_name=APP, user_id=USER, session_id="s1") is None

    run(case)


def test_append_event_to_a_deleted_session_is_refused(service: BaseSessionService) -> None:
    async def case() -> None:
        session = await service.create_session(app_name=APP, user_id=USER, session_id="gone")
        await service.delete_session(app_name=APP, user_id=USER, session_id="gone")
        with pytest.raises(SessionNotFoundError):
            await service.append_event(session, Event(author="user"))

    run(case)


# ---- what ctxstore adds ------------------------------------------------------------------


def test_racing_stale_writers_one_wins(ours: CtxStoreSessionService) -> None:
    """ADK's concurrent-stale-writers case: two copies of one session read at the same
    version append at once; exactly one is stored, the other is told its session is stale."""

    async def case() -> None:
        session = await ours.create_session(app_name=APP, user_id=USER)
        for i in range(6):
            latest = await ours.get_session(app_name=APP, user_id=USER, session_id=session.id)
            assert latest is not None
            one, two = latest.model_copy(deep=True), latest.model_copy(deep=True)
            results = await asyncio.gather(
                ours.append_event(one, Event(invocation_id=f"{i}-1", author="user",
                                             actions=delta(**{f"k{i}": 1}))),
                ours.append_event(two, Event(invocation_id=f"{i}-2", author="user",
                                             actions=delta(**{f"k{i}": 2}))),
                return_exceptions=True,
            )  # fmt: skip
            errors = [r for r in results if isinstance(r, Exception)]
            assert len(errors) == 1 and "modified in storage" in str(errors[0])
        final = await ours.get_session(app_name=APP, user_id=USER, session_id=session.id)
        assert final is not None and len(final.events) == 6
        assert all(final.state[f"k{i}"] in (1, 2) for i in range(6))

    run(case)


def test_a_session_read_in_part_follows_other_writers_and_erasures(durable_url: str) -> None:
    """get_session builds only the events asked for, from a fold it remembers by the
    session's head: another service's append, or the session deleted and made again under
    its id with as many events, is read, never the remembered fold."""

    async def case() -> None:
        with ContextStore.from_url(durable_url) as one, ContextStore.from_url(durable_url) as two:
            reader, writer = CtxStoreSessionService(one), CtxStoreSessionService(two)
            session = await writer.create_session(app_name=APP, user_id=USER, session_id="s")

            async def recent() -> tuple[list[str | None], Any]:
                got = await reader.get_session(app_name=APP, user_id=USER, session_id="s",
                                               config=GetSessionConfig(num_recent_events=2))  # fmt: skip
                assert got is not None
                return [e.invocation_id for e in got.events], got.state

            for i in range(3):
                await writer.append_event(session, Event(invocation_id=f"a{i}", author="user",
                                                         timestamp=i, actions=delta(n=i)))  # fmt: skip
            assert await recent() == (["a1", "a2"], {"n": 2})
            await writer.append_event(session, Event(invocation_id="a3", author="user",
                                                     timestamp=3, actions=delta(n=3)))  # fmt: skip
            assert await recent() == (["a2", "a3"], {"n": 3})
            await writer.delete_session(app_name=APP, user_id=USER, session_id="s")
            again = await writer.create_session(app_name=APP, user_id=USER, session_id="s")
            for i in range(4):
                await writer.append_event(again, Event(invocation_id=f"b{i}", author="user",
                                                       timestamp=i, actions=delta(m=i)))  # fmt: skip
            assert await recent() == (["b2", "b3"], {"m": 3})

    run(case)


def test_a_retried_append_is_a_no_op(ours: CtxStoreSessionService) -> None:
    async def case() -> None:
        session = await ours.create_session(app_name=APP, user_id=USER)
        event = Event(invocation_id="inv", author="user", actions=delta(n=1))
        stale = session.model_copy(deep=True)
        await ours.append_event(session, event)
        await ours.append_event(stale, event)  # its reply was lost: sent again
        got = await ours.get_session(app_name=APP, user_id=USER, session_id=session.id)
        assert got is not None and [e.id for e in got.events] == [event.id]

    run(case)


def test_the_context_reads_as_the_conversation(durable_url: str) -> None:
    with ContextStore.from_url(durable_url) as store:
        ours = CtxStoreSessionService(store)

        async def case() -> str:
            session = await ours.create_session(app_name=APP, user_id=USER, session_id="chat")
            call = types.FunctionCall(id="c1", name="weather", args={"city": "Paris"})
            answer = types.FunctionResponse(id="c1", name="weather", response={"temp": 21})
            for author, role, part in [
                ("user", "user", types.Part(text="Weather in Paris?")),
                ("agent", "model", types.Part(function_call=call)),
                ("user", "user", types.Part(function_response=answer)),
                ("agent", "model", types.Part(text="21 °C in Paris.")),
            ]:
                content = types.Content(role=role, parts=[part])
                await ours.append_event(session, Event(author=author, content=content))
            return session.id

        sid = asyncio.run(case())
        cid = ours._held(ours._session_key(APP, USER, sid))
        assert cid is not None
        seen = store.visible(cid[0])
        # Each event's content is a Gemini message, exactly; the creation is a record.
        assert seen.to_gemini()["contents"] == [
            {"role": "user", "parts": [{"text": "Weather in Paris?"}]},
            {"role": "model", "parts": [{"function_call": {
                "id": "c1", "args": {"city": "Paris"}, "name": "weather"}}]},
            {"role": "user", "parts": [{"function_response": {
                "id": "c1", "name": "weather", "response": {"temp": 21}}}]},
            {"role": "model", "parts": [{"text": "21 °C in Paris."}]},
        ]  # fmt: skip
        assert seen.to_openai() == [
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
             "function": {"name": "weather", "arguments": '{"city": "Paris"}'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": '{"temp": 21}'},
            {"role": "assistant", "content": "21 °C in Paris."},
        ]  # fmt: skip
        assert len(seen.messages) == 5
        kinds = [h.type for h in store.history(cid[0])]
        assert kinds.count("insert") == 5


class Scripted(BaseLlm):
    """A model that answers from a script: a tool call, then text (ADK ships no fake)."""

    model: str = "scripted"
    replies: list[types.Content]

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        yield LlmResponse(content=self.replies.pop(0))


def test_a_runner_keeps_its_session_here(durable_url: str) -> None:
    def weather(city: str) -> dict[str, Any]:
        """The weather in a city."""
        return {"city": city, "temp": 21}

    model = Scripted(replies=[
        types.Content(role="model", parts=[types.Part(function_call=types.FunctionCall(
            name="weather", args={"city": "Paris"}))]),
        types.Content(role="model", parts=[types.Part(text="21 °C in Paris.")]),
    ])  # fmt: skip
    agent = LlmAgent(name="forecaster", model=model, tools=[weather],
                     output_key="last_answer")  # fmt: skip
    with ContextStore.from_url(durable_url) as store:
        sessions = CtxStoreSessionService(store)
        runner = Runner(agent=agent, app_name="weather", session_service=sessions)

        async def case() -> Any:
            await sessions.create_session(app_name="weather", user_id="u", session_id="s")
            asked = types.Content(role="user", parts=[types.Part(text="Weather in Paris?")])
            async for _ in runner.run_async(user_id="u", session_id="s", new_message=asked):
                pass
            return await sessions.get_session(app_name="weather", user_id="u", session_id="s")

        session = asyncio.run(case())
        texts = [p.text for e in session.events for p in e.content.parts if p.text]
        assert texts == ["Weather in Paris?", "21 °C in Paris."]
        assert [p.function_response.response for e in session.events
                for p in e.content.parts if p.function_response] == [
            {"city": "Paris", "temp": 21}]  # fmt: skip
        assert session.state["last_answer"] == "21 °C in Paris."


def test_an_events_image_is_stored_once_and_read_back(ours: CtxStoreSessionService) -> None:
    image = os.urandom(900_000)  # with its event's JSON, over a message's 1 MB alone

    async def case() -> Any:
        session = await ours.create_session(app_name=APP, user_id=USER, session_id="img")
        content = types.Content(role="user", parts=[
            types.Part(text="What is in it?"),
            types.Part.from_bytes(data=image, mime_type="image/png")])  # fmt: skip
        for _ in range(3):
            await ours.append_event(session, Event(author="user", content=content))
        return await ours.get_session(app_name=APP, user_id=USER, session_id="img"), content

    got, content = asyncio.run(case())
    assert [e.content for e in got.events] == [content] * 3
    assert ours.store._storage.blobs.stored_bytes() == len(image)  # type: ignore[attr-defined]


def test_an_event_that_would_break_pairing_is_kept_as_a_record(durable_url: str) -> None:
    """A long-running tool: its call is answered after another turn. ADK's session takes
    every event; the call, unanswered when the next turn came, is kept as a record."""
    with ContextStore.from_url(durable_url) as store:
        ours = CtxStoreSessionService(store)

        async def case() -> Any:
            session = await ours.create_session(app_name=APP, user_id=USER, session_id="long")
            call = types.FunctionCall(id="c9", name="render_video", args={})
            answer = types.FunctionResponse(id="c9", name="render_video", response={"ok": True})
            events = [
                Event(author="user", content=types.Content(role="user", parts=[types.Part(text="Render it")])),
                Event(author="agent", content=types.Content(role="model", parts=[types.Part(function_call=call)])),
                Event(author="user", content=types.Content(role="user", parts=[types.Part(text="Still there?")])),
                Event(author="user", content=types.Content(role="user", parts=[types.Part(function_response=answer)])),
            ]  # fmt: skip
            for event in events:
                await ours.append_event(session, event)
            got = await ours.get_session(app_name=APP, user_id=USER, session_id="long")
            return events, got

        events, got = asyncio.run(case())
        assert got is not None and [e.model_dump() for e in got.events] == [
            e.model_dump() for e in events
        ]
