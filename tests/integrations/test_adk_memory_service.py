"""Google ADK's memory-service contract, on SQLite and PostgreSQL, on every surface.

google-adk's source distribution ships no tests, so the cases of ADK's own suite for its
InMemoryMemoryService (tests/unittests/memory/test_in_memory_memory_service.py in
google/adk-python, the version of ADK 2.13's service: any-word matching, ranking by
matched words, at most ten) are ported here, each named after the case it ports; its
checks of the service's private dicts read what the service keeps instead (`kept`). Each
also runs against ADK's InMemoryMemoryService, so a case ported wrongly fails there too.
Then what ctxstore adds: a user's memories stay that user's (and the tenant's), adding is
idempotent, a deleted memory stays deleted, and a Runner recalls a past session.
"""

from __future__ import annotations

import asyncio
import threading
import unicodedata
from collections.abc import AsyncGenerator, Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("google.adk")  # (a test dependency: see pyproject's test extra)

from google.adk.agents import LlmAgent
from google.adk.events.event import Event
from google.adk.memory import InMemoryMemoryService
from google.adk.memory.base_memory_service import BaseMemoryService
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions.session import Session
from google.adk.tools.preload_memory_tool import PreloadMemoryTool
from google.genai import types

from ctxstore.adapters.http.client import CtxStoreClient
from ctxstore.adapters.integrations.adk_memory_service import MEMORY, CtxStoreMemoryService
from ctxstore.adapters.integrations.adk_session_service import CtxStoreSessionService
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.domain.errors import InvalidOperationError

from ..conftest import make_url, served, surface_over

APP, USER, OTHER = "test-app", "test-user", "another-user"
PG = pytest.mark.postgres


def event(tag: str, text: str, *, author: str = "user", at: float = 12345.0) -> Event:
    said = types.Content(parts=[types.Part(text=text)])
    return Event(id=f"event-{tag}", invocation_id=f"inv-{tag}", author=author, timestamp=at,
                 content=said)  # fmt: skip


def session(sid: str, *events: Event, user: str = USER, app: str = APP) -> Session:
    return Session(app_name=app, user_id=user, id=sid, last_update_time=1000, events=list(events))


SESSION_1 = session(
    "session-1",
    event("1a", "The ADK is a great toolkit."),
    Event(id="event-1b", invocation_id="inv-2", author="user", timestamp=12346),  # no content
    event("1c", "I agree. The Agent Development Kit (ADK) rocks!", author="model", at=12347),
)
SESSION_2 = session("session-2", event("2a", "I like to code in Python.", at=54321))
SESSION_OTHER_USER = session("session-3", event("3a", "This is a secret.", at=60000), user=OTHER)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=PG), "sqlite-async",
                        pytest.param("postgres-async", marks=PG), "sqlite-http",
                        pytest.param("postgres-http", marks=PG), "adk-in-memory"])  # fmt: skip
def service(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseMemoryService]:
    """ctxstore's service on every durable backend and surface (the store, an async one
    over it, a tenant's HTTP client), and ADK's in-memory service as the reference."""
    if request.param == "adk-in-memory":
        yield InMemoryMemoryService()
        return
    backend, _, mode = request.param.partition("-")
    with (
        ContextStore.from_url(make_url(backend, tmp_path, request)) as store,
        surface_over(mode or "store", store) as given,
    ):
        yield CtxStoreMemoryService(given)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=PG), "adk-in-memory"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseMemoryService]:
    """ctxstore's service on each search engine (how text is split and matched is the
    engine's, whatever the surface), and ADK's in-memory service as the reference."""
    if request.param == "adk-in-memory":
        yield InMemoryMemoryService()
        return
    with ContextStore.from_url(make_url(request.param, tmp_path, request)) as store:
        yield CtxStoreMemoryService(store)


@pytest.fixture
def store(durable_url: str) -> Iterator[ContextStore]:
    with ContextStore.from_url(durable_url) as opened:
        yield opened


@pytest.fixture
def ours(store: ContextStore) -> CtxStoreMemoryService:
    return CtxStoreMemoryService(store)


Step = Callable[[], Coroutine[Any, Any, Any]]


def run(step: Step) -> Any:
    return asyncio.run(step())


def kept(service: BaseMemoryService, app: str = APP, user: str = USER) -> list[str]:
    """The ids of the memories a service keeps for a user, in the order added."""
    if isinstance(service, InMemoryMemoryService):
        found = service._session_events.get((app, user), {})
        return [e.id for events in found.values() for e in events]
    assert isinstance(service, CtxStoreMemoryService)
    cid = service.store.lookup_key(service.context_key(app, user))
    if cid is None:
        return []
    messages = service.store.visible(cid).messages
    said = [m.metadata[MEMORY] for m in messages if MEMORY in m.metadata]
    return [str(memory["id"]) for memory in said if isinstance(memory, dict)]


async def texts(service: BaseMemoryService, query: str, user: str = USER) -> list[str]:
    found = await service.search_memory(app_name=APP, user_id=user, query=query)
    return [m.content.parts[0].text or "" for m in found.memories if m.content.parts]


# ---- ADK's cases ---------------------------------------------------------------------------


def test_add_session_to_memory(service: BaseMemoryService) -> None:
    run(lambda: service.add_session_to_memory(SESSION_1))
    assert kept(service) == ["event-1a", "event-1c"]  # the event without content left out


def test_add_events_to_memory_with_explicit_events(service: BaseMemoryService) -> None:
    run(lambda: service.add_events_to_memory(app_name=APP, user_id=USER, session_id="session-1",
                                             events=[SESSION_1.events[0]]))  # fmt: skip
    assert kept(service) == ["event-1a"]


def test_add_events_to_memory_without_session_id_uses_default_bucket(
    service: BaseMemoryService,
) -> None:
    run(lambda: service.add_events_to_memory(app_name=APP, user_id=USER,
                                             events=[SESSION_1.events[0]]))  # fmt: skip
    assert kept(service) == ["event-1a"]
    assert run(lambda: texts(service, "toolkit")) == ["The ADK is a great toolkit."]


def test_add_events_to_memory_appends_without_replacing(service: BaseMemoryService) -> None:
    async def case() -> None:
        await service.add_session_to_memory(SESSION_1)
        new = event("1d", "A new fact.", at=12348)
        await service.add_events_to_memory(
            app_name=APP, user_id=USER, session_id="session-1", events=[new]
        )

    run(case)
    assert kept(service) == ["event-1a", "event-1c", "event-1d"]


def test_add_events_to_memory_deduplicates_event_ids(service: BaseMemoryService) -> None:
    async def case() -> None:
        await service.add_session_to_memory(SESSION_1)
        again = event("1a", "Updated duplicate text.", at=12349)
        await service.add_events_to_memory(app_name=APP, user_id=USER, session_id="session-1",
                                           events=[again])  # fmt: skip
        assert await texts(service, "duplicate") == []  # the first one kept

    run(case)
    assert kept(service) == ["event-1a", "event-1c"]


def test_add_session_with_no_events_to_memory(service: BaseMemoryService) -> None:
    run(lambda: service.add_session_to_memory(session("session-4")))
    assert kept(service) == []


def test_search_memory_simple_match(service: BaseMemoryService) -> None:
    async def case() -> None:
        await service.add_session_to_memory(SESSION_1)
        await service.add_session_to_memory(SESSION_2)
        found = await service.search_memory(app_name=APP, user_id=USER, query="Python")
        assert [m.content.parts[0].text for m in found.memories if m.content.parts] == [
            "I like to code in Python."
        ]
        assert found.memories[0].author == "user"

    run(case)


def test_search_memory_case_insensitive_match(service: BaseMemoryService) -> None:
    run(lambda: service.add_session_to_memory(SESSION_1))
    assert run(lambda: texts(service, "development")) == [
        "I agree. The Agent Development Kit (ADK) rocks!"
    ]


def test_search_memory_multiple_matches(service: BaseMemoryService) -> None:
    run(lambda: service.add_session_to_memory(SESSION_1))
    assert sorted(run(lambda: texts(service, "How about ADK?"))) == [
        "I agree. The Agent Development Kit (ADK) rocks!",
        "The ADK is a great toolkit.",
    ]


def test_search_memory_no_match(service: BaseMemoryService) -> None:
    run(lambda: service.add_session_to_memory(SESSION_1))
    assert run(lambda: texts(service, "nonexistent")) == []


def test_search_memory_is_scoped_by_user(service: BaseMemoryService) -> None:
    async def case() -> None:
        await service.add_session_to_memory(SESSION_1)
        await service.add_session_to_memory(SESSION_OTHER_USER)
        assert await texts(service, "secret") == []
        assert await texts(service, "secret", user=OTHER) == ["This is a secret."]

    run(case)


def test_search_memory_does_not_collide_on_slash_in_identifiers(
    service: BaseMemoryService,
) -> None:
    async def case() -> list[MemoryEntry]:
        slashed = session("s", event("slashed-app", "This is a secret."), app="app/other-user",
                          user="user")  # fmt: skip
        await service.add_session_to_memory(slashed)
        got = await service.search_memory(app_name="app", user_id="other-user/user", query="secret")
        return got.memories

    assert run(case) == []


NON_LATIN = [
    # Japanese and Chinese: no spaces (substrings); Korean and Cyrillic: words
    ("私の名前は太郎です", "太郎", 1), ("私の名前は太郎です", "天気", 0),
    ("我喜欢机器学习", "机器学习", 1), ("我喜欢机器学习", "天气预报", 0),
    ("제 이름은 민수입니다", "민수입니다", 1), ("Меня зовут Алексей", "Алексей", 1),
    # a non-Latin substring and a Latin word in one event
    ("太郎 works at ABC Corp", "太郎", 1), ("太郎 works at ABC Corp", "ABC", 1),
    # a Latin word inside an unspaced script
    ("私はPythonでADKを使っています", "Python", 1), ("私はPythonでADKを使っています", "adk", 1),
    ("我用Python写代码", "python", 1), ("私はPythonでADKを使っています", "使って", 1),
    ("私はPythonでADKを使っています", "Java", 0),
    # a part of a Latin word never matches
    ("I like to code in Python.", "thon", 0), ("私はPythonでADKを使っています", "thon", 0),
    # decomposed (NFD) text matches its composed form
    (unicodedata.normalize("NFD", "私はCaféでADKを使っています"), "Café", 1),
    (unicodedata.normalize("NFD", "私はCaféでADKを使っています"), "café", 1),
    (unicodedata.normalize("NFD", "私はCaféでADKを使っています"), "Ruby", 0),
    (unicodedata.normalize("NFD", "Meet at the Café"), "Café", 1),
    ("Meet at the Café", unicodedata.normalize("NFD", "Café"), 1),
    (unicodedata.normalize("NFD", "プログラミングを学ぶ"), "プログラミング", 1),
    (unicodedata.normalize("NFD", "제 이름은 민수입니다"), "민수입니다", 1),
]  # fmt: skip


@pytest.mark.parametrize("text,query,expected", NON_LATIN)
def test_search_memory_non_latin(
    engine: BaseMemoryService, text: str, query: str, expected: int
) -> None:
    run(lambda: engine.add_session_to_memory(session("session-i18n", event("i18n", text))))
    assert len(run(lambda: texts(engine, query))) == expected


def test_search_memory_ranks_by_number_of_matching_words(service: BaseMemoryService) -> None:
    ranked = session(
        "session-ranked",
        event("ranked-a", "The deploy is ready."),
        event("ranked-b", "Ready."),
        event("ranked-c", "The deploy status is ready."),
    )
    run(lambda: service.add_session_to_memory(ranked))
    assert run(lambda: texts(service, "deploy status ready")) == [
        "The deploy status is ready.", "The deploy is ready.", "Ready."]  # fmt: skip


def test_search_memory_returns_at_most_ten_memories(service: BaseMemoryService) -> None:
    notes = [event(f"note-{i}", f"note {i} about work") for i in range(20)]
    many = session("session-many", *notes, event("backlog", "the backlog note about work"))
    run(lambda: service.add_session_to_memory(many))
    # the best match, added last, ranks first; the rest tie, in the order added
    assert run(lambda: texts(service, "work backlog note")) == [
        "the backlog note about work", *(f"note {i} about work" for i in range(9))]  # fmt: skip


def test_search_memory_is_thread_safe_against_concurrent_writes(
    service: BaseMemoryService,
) -> None:
    """(ADK's case runs 500 rounds a thread on its in-memory dicts; 15 here, each a write.)"""

    def fact(i: str) -> Session:
        return session(f"session-{i}", event(i, f"fact about {i}", at=1.0))

    def add(name: str) -> None:
        run(lambda: service.add_session_to_memory(fact(name)))

    for i in range(5):
        add(f"seed-{i}")
    errors: list[BaseException] = []
    barrier = threading.Barrier(3)

    def writer() -> None:
        barrier.wait()
        try:
            for i in range(15):
                add(f"writer-{i}")
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    def reader() -> None:
        barrier.wait()
        try:
            for _ in range(15):
                assert run(lambda: texts(service, "fact"))  # the seeds at least
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=f) for f in (writer, reader, reader)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    assert len(kept(service)) == 20


@pytest.mark.parametrize("ingest_session", [True, False])
def test_ingested_memories_do_not_follow_caller_event_mutations(
    service: BaseMemoryService, ingest_session: bool
) -> None:
    said = event("tea", "I prefer jasmine tea.")
    given = session("session", said)

    async def case() -> list[MemoryEntry]:
        await add(service, given, ingest_session)
        said.author = "changed"
        said.content.parts[0].text = "I prefer coffee."  # type: ignore[union-attr,index]
        return (await service.search_memory(app_name=APP, user_id=USER, query="jasmine")).memories

    found = run(case)
    assert [(m.author, m.content.parts[0].text) for m in found if m.content.parts] == [
        ("user", "I prefer jasmine tea.")]  # fmt: skip


@pytest.mark.parametrize("ingest_session", [True, False])
def test_retrieved_memories_do_not_mutate_storage_or_session_history(
    service: BaseMemoryService, ingest_session: bool
) -> None:
    given = session("session", event("tea", "I prefer jasmine tea."))

    async def case() -> None:
        await add(service, given, ingest_session)
        first = await service.search_memory(app_name=APP, user_id=USER, query="jasmine")
        first.memories[0].content.parts.clear()  # type: ignore[union-attr]
        assert await texts(service, "jasmine") == ["I prefer jasmine tea."]

    run(case)
    source = given.events[0].content
    assert source is not None and source.parts is not None
    assert source.parts[0].text == "I prefer jasmine tea."


async def add(service: BaseMemoryService, given: Session, whole: bool) -> None:
    if whole:
        await service.add_session_to_memory(given)
    else:
        await service.add_events_to_memory(app_name=given.app_name, user_id=given.user_id,
                                           session_id=given.id, events=given.events)  # fmt: skip


# ---- what ctxstore adds ---------------------------------------------------------------------


def test_only_events_with_content_are_memories(service: BaseMemoryService) -> None:
    empty = Event(id="event-empty", author="user", content=types.Content(role="user", parts=[]))
    given = session("s", Event(id="event-none", author="user"), empty, event("said", "Hello"))
    run(lambda: service.add_session_to_memory(given))
    assert kept(service) == ["event-said"]  # (ADK's rule: content with parts)


def test_a_question_finds_the_memory_that_answers_it(service: BaseMemoryService) -> None:
    told = session("s", event("color", "My favorite color is blue"), event("pet", "I have a cat"))
    run(lambda: service.add_session_to_memory(told))
    assert run(lambda: texts(service, "what is my favorite color?")) == [
        "My favorite color is blue"]  # fmt: skip
    assert run(lambda: texts(service, "?!")) == []  # no words: nothing asked


def test_a_memory_reads_back_as_adks_in_memory_service_returns_it(
    ours: CtxStoreMemoryService,
) -> None:
    reference = InMemoryMemoryService()

    async def both(service: BaseMemoryService) -> list[MemoryEntry]:
        await service.add_session_to_memory(SESSION_1)
        await service.add_session_to_memory(SESSION_2)
        return (await service.search_memory(app_name=APP, user_id=USER, query="ADK")).memories

    got = run(lambda: both(ours))
    assert len(got) == 2 and got == run(lambda: both(reference))  # content, author, time, id


def test_a_users_memories_are_theirs_alone(service: BaseMemoryService) -> None:
    """Another user of the app, the same user of another app, and names that would alias
    each other in a key joined by a separator."""
    secret = event("s", "The vault code is 1234")
    pairs = [(APP, OTHER), ("other-app", USER), ('a", "b', "c"), ("a", 'b", "c'), ("a:b", "c"),
             ("a", "b:c")]  # fmt: skip

    async def case() -> None:
        await service.add_events_to_memory(app_name=APP, user_id=USER, events=[secret])
        for app, user in pairs:
            found = await service.search_memory(app_name=app, user_id=user, query="vault code")
            assert found.memories == [], (app, user)
        await service.add_events_to_memory(app_name='a", "b', user_id="c", events=[secret])
        assert not (
            await service.search_memory(app_name="a", user_id='b", "c', query="vault")
        ).memories

    run(case)


def test_a_tenants_memories_are_not_another_tenants(store: ContextStore) -> None:
    with (
        served(store) as url, CtxStoreClient(url, token="token-acme") as acme,
        CtxStoreClient(url, token="token-globex") as globex,
    ):  # fmt: skip
        ours, theirs = CtxStoreMemoryService(acme), CtxStoreMemoryService(globex)
        run(lambda: ours.add_session_to_memory(SESSION_1))
        assert run(lambda: texts(ours, "toolkit")) == ["The ADK is a great toolkit."]
        assert run(lambda: texts(theirs, "toolkit")) == []  # the same app and user, elsewhere


def test_memories_and_sessions_are_separate_contexts(store: ContextStore) -> None:
    sessions, memory = CtxStoreSessionService(store), CtxStoreMemoryService(store)

    async def case() -> None:
        s = await sessions.create_session(app_name=APP, user_id=USER, session_id="s")
        await sessions.append_event(s, event("x", "Remember the milk"))
        await memory.add_session_to_memory(await sessions.get_session(
            app_name=APP, user_id=USER, session_id="s"))  # type: ignore[arg-type]  # fmt: skip
        assert [x.id for x in (await sessions.list_sessions(app_name=APP)).sessions] == ["s"]
        assert await texts(memory, "milk") == ["Remember the milk"]

    run(case)
    held = store.lookup_key(memory.context_key(APP, USER))
    assert held is not None and held != store.lookup_key(sessions.context_key(APP, USER, "s"))


def test_adding_a_session_again_adds_nothing(ours: CtxStoreMemoryService) -> None:
    async def case() -> None:
        await asyncio.gather(*(ours.add_session_to_memory(SESSION_1) for _ in range(4)))
        await ours.add_session_to_memory(SESSION_1)

    run(case)
    assert kept(ours) == ["event-1a", "event-1c"]  # racing adds too: each memory once


def test_a_deleted_memory_is_never_found_nor_added_again(ours: CtxStoreMemoryService) -> None:
    async def case() -> None:
        await ours.add_session_to_memory(SESSION_1)
        await ours.add_session_to_memory(session("elsewhere", event("1a", "The ADK is great."),
                                                 user=OTHER))  # fmt: skip
        await ours.delete_memory(app_name=APP, user_id=USER, memory_id="event-1a")
        await ours.add_session_to_memory(SESSION_1)  # ADK adds the session after each turn
        await ours.add_events_to_memory(app_name=APP, user_id=USER, events=SESSION_1.events)
        assert await texts(ours, "toolkit") == []
        await ours.delete_memory(app_name=APP, user_id=USER, memory_id="no-such-memory")
        await ours.delete_memory(app_name=APP, user_id=USER, memory_id=None)
        await ours.delete_memory(app_name="no-app", user_id=USER, memory_id="event-1c")

    run(case)
    assert kept(ours) == ["event-1c"]
    assert kept(ours, user=OTHER) == ["event-1a"]  # another user's memory of the same id


def test_a_deleted_memory_stays_in_history_until_the_context_is_erased(
    ours: CtxStoreMemoryService, store: ContextStore
) -> None:
    run(lambda: ours.add_session_to_memory(SESSION_1))
    run(lambda: ours.delete_memory(app_name=APP, user_id=USER, memory_id="event-1a"))
    cid = store.lookup_key(ours.context_key(APP, USER))
    assert cid is not None
    hidden = store.search("toolkit", context_ids=[cid], include_hidden=True).hits
    assert [h.visible for h in hidden] == [False]  # the audit trail keeps what it said
    store.erase(cid, reason="the user asked to be forgotten")
    assert store.lookup_key(ours.context_key(APP, USER)) is None
    assert run(lambda: texts(ours, "ADK")) == []


def test_add_memory_keeps_explicit_entries(ours: CtxStoreMemoryService) -> None:
    entries = [
        MemoryEntry(id="pref-1", content=types.Content(role="user", parts=[
            types.Part(text="Prefers window seats")]), author="user",
            timestamp="2025-01-02T03:04:05", custom_metadata={"source": "profile"}),
        MemoryEntry(content=types.Content(parts=[types.Part(text="Allergic to peanuts")])),
    ]  # fmt: skip

    async def case() -> list[MemoryEntry]:
        await ours.add_memory(app_name=APP, user_id=USER, memories=entries,
                              custom_metadata={"source": "import", "ttl": "30d"})  # fmt: skip
        await ours.add_memory(app_name=APP, user_id=USER, memories=entries[:1])  # kept: same id
        found = await ours.search_memory(app_name=APP, user_id=USER, query="window peanuts")
        return found.memories

    seat, nuts = run(case)
    assert seat == entries[0].model_copy(
        update={"custom_metadata": {"source": "profile", "ttl": "30d"}})  # fmt: skip
    assert nuts.content == entries[1].content and nuts.id and nuts.author is None
    assert nuts.custom_metadata == {"source": "import", "ttl": "30d"}
    assert len(kept(ours)) == 2


def test_a_memorys_calls_and_images_read_back(ours: CtxStoreMemoryService) -> None:
    """A function call, its result and an image are memories as ADK keeps them; what
    ctxstore searches of them (a call's name and arguments, a result) finds them."""
    call = types.Content(role="model", parts=[types.Part(function_call=types.FunctionCall(
        name="book_flight", args={"to": "Lisbon"}))])  # fmt: skip
    result = types.Content(role="user", parts=[types.Part(function_response=types.FunctionResponse(
        name="book_flight", response={"seat": "14A"}))])  # fmt: skip
    photo = types.Part.from_bytes(data=b"\x89PNG...", mime_type="image/png")
    image = types.Content(role="user", parts=[types.Part(text="my passport photo"), photo])
    events = [Event(id=f"e{i}", author="a", timestamp=1.0, content=c)
              for i, c in enumerate([call, result, image])]  # fmt: skip
    run(lambda: ours.add_events_to_memory(app_name=APP, user_id=USER, events=events))

    async def content(query: str) -> list[types.Content]:
        found = await ours.search_memory(app_name=APP, user_id=USER, query=query)
        return [m.content for m in found.memories]

    assert run(lambda: content("Lisbon")) == [call]
    assert run(lambda: content("14A")) == [result]
    assert run(lambda: content("passport")) == [image]


def test_memories_outlive_the_store_that_wrote_them(durable_url: str) -> None:
    with ContextStore.from_url(durable_url) as store:
        run(lambda: CtxStoreMemoryService(store).add_session_to_memory(SESSION_2))
    with ContextStore.from_url(durable_url) as store:
        assert run(lambda: texts(CtxStoreMemoryService(store), "python")) == [
            "I like to code in Python."]  # fmt: skip


def test_bad_input_is_refused_with_a_typed_error(ours: CtxStoreMemoryService) -> None:
    loose: Any = ours  # (what a caller without type checking may pass)
    said = types.Content(parts=[types.Part(text="x")])
    nothing = MemoryEntry(content=types.Content(parts=[]))
    odd = {"when": object()}
    bad: list[Step] = [
        lambda: loose.search_memory(app_name=APP, user_id=USER, query=42),
        lambda: loose.search_memory(app_name=None, user_id=USER, query="x"),
        lambda: loose.add_session_to_memory({"app_name": APP}),
        lambda: loose.add_events_to_memory(app_name=APP, user_id=USER, events="not events"),
        lambda: loose.add_events_to_memory(
            app_name=APP, user_id=USER, events=[event("a", "x")], custom_metadata=odd
        ),
        lambda: loose.add_memory(app_name=APP, user_id=USER, memories=[said]),
        lambda: loose.add_memory(app_name=APP, user_id=USER, memories=[nothing]),
        lambda: loose.delete_memory(app_name=APP, user_id=USER, memory_id=7),
    ]
    for step in bad:
        with pytest.raises(InvalidOperationError):
            run(step)
    with pytest.raises(InvalidOperationError):
        CtxStoreMemoryService(ours.store, max_results=0)
    assert kept(ours) == []  # nothing refused was kept


class Scripted(BaseLlm):
    """A model that answers from a script and keeps each request it was sent."""

    model: str = "scripted"
    replies: list[str]
    sent: list[LlmRequest]

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.sent.append(llm_request)
        said = types.Content(role="model", parts=[types.Part(text=self.replies.pop(0))])
        yield LlmResponse(content=said)


def test_a_runner_recalls_a_past_session(store: ContextStore) -> None:
    """ADK's preload_memory tool searches memory with the user's message and shows the
    model what it found: a question in a new session recalls an earlier session's fact."""
    model = Scripted(replies=["Noted.", "Blue."], sent=[])
    agent = LlmAgent(name="assistant", model=model, tools=[PreloadMemoryTool()])
    sessions, memory = CtxStoreSessionService(store), CtxStoreMemoryService(store)
    runner = Runner(agent=agent, app_name=APP, session_service=sessions, memory_service=memory)

    async def turn(sid: str, text: str) -> Session:
        said = types.Content(role="user", parts=[types.Part(text=text)])
        async for _ in runner.run_async(user_id=USER, session_id=sid, new_message=said):
            pass
        got = await sessions.get_session(app_name=APP, user_id=USER, session_id=sid)
        assert got is not None
        return got

    async def case() -> None:
        await sessions.create_session(app_name=APP, user_id=USER, session_id="monday")
        await memory.add_session_to_memory(await turn("monday", "My favorite color is blue"))
        await sessions.create_session(app_name=APP, user_id=USER, session_id="friday")
        await turn("friday", "What is my favorite color?")

    run(case)
    shown = [p.text or "" for c in model.sent[1].contents for p in c.parts or []]
    assert any("user: My favorite color is blue" in t for t in shown), shown
