"""Google ADK capture: a real Runner with an LlmAgent whose Gemini model sends through
google-genai to the local fake provider; the plugin records every model call into the
session's context on CtxStoreSessionService (SQLite and PostgreSQL; the store, the async
store and a tenant's HTTP client), each request equal to the body the provider received."""

from __future__ import annotations

import asyncio
import json
import re
import time
from typing import Any

import pytest

pytest.importorskip("google.adk")  # (a test dependency: see pyproject's test extra)

from google import genai
from google.adk.agents import LlmAgent
from google.adk.agents._streaming_mode import StreamingMode  # (run_config's, not re-exported)
from google.adk.agents.run_config import RunConfig
from google.adk.models.google_llm import Gemini
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.genai import types

import ctxstore.capture
from ctxstore.adapters.integrations.adk_session_service import CtxStoreSessionService
from ctxstore.adapters.integrations.surface import faces
from ctxstore.adapters.store.facade import ContextStore
from tests.fake_provider import Reply

from ..conftest import SURFACES, surface_over

APP, USER = "weather", "u"


def weather(city: str) -> dict[str, Any]:
    """The weather in a city."""
    return {"city": city, "sky": "sunny"}


def runner_on(provider: Any, sessions: Any, plugins: list[Any]) -> Runner:
    client = genai.Client(api_key="x", http_options=types.HttpOptions(base_url=provider.url))
    agent = LlmAgent(
        name="forecaster", model=Gemini(model="gemini-2.5-flash", client=client),
        instruction="Answer briefly.", tools=[weather],
    )  # fmt: skip
    return Runner(agent=agent, app_name=APP, session_service=sessions, plugins=plugins)


def ask(runner: Runner, sid: str, text: str, *, stream: bool = False) -> list[Any]:
    config = RunConfig(streaming_mode=StreamingMode.SSE if stream else StreamingMode.NONE)

    async def case() -> list[Any]:
        if (
            await runner.session_service.get_session(app_name=APP, user_id=USER, session_id=sid)
            is None
        ):
            await runner.session_service.create_session(app_name=APP, user_id=USER, session_id=sid)
        message = types.Content(role="user", parts=[types.Part(text=text)])
        return [e async for e in runner.run_async(
            user_id=USER, session_id=sid, new_message=message, run_config=config)]  # fmt: skip

    return asyncio.run(case())


def sent(provider: Any) -> list[dict[str, Any]]:
    """The generateContent bodies the provider received (streamed or not), in order."""
    return [r.body for r in provider.received if "generatecontent" in r.path.lower()]


def listed(reads: Any, cid: Any, count: int) -> Any:
    """The context's calls, once the audit index lists `count` (on PostgreSQL it lists a
    commit once no older transaction of the server is still open: a busy server lags)."""
    deadline = time.monotonic() + 30
    while len(found := reads.calls(cid)) < count and time.monotonic() < deadline:
        time.sleep(0.2)
    return found


def conversation() -> list[Reply]:
    return [Reply(tool="weather", arguments={"city": "Paris"}, prompt_tokens=20,
                  completion_tokens=5), Reply(text="Sunny in Paris.")]  # fmt: skip


def shown(events: list[Any]) -> list[Any]:
    """The events as a run shows them, without their random ids and times."""
    found = []
    for e in events:
        content = json.loads(e.content.model_dump_json(exclude_none=True)) if e.content else None
        for part in (content or {}).get("parts", []):
            for kind in ("function_call", "function_response"):
                part.get(kind, {}).pop("id", None)
        found.append((e.author, e.partial, content))
    return found


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("surface", SURFACES)
def test_every_model_call_is_recorded_as_the_provider_received_it(
    durable_url: str, fake_provider: Any, surface: str, stream: bool
) -> None:
    with ContextStore.from_url(durable_url) as store, surface_over(surface, store) as given:
        sessions = CtxStoreSessionService(given)
        fake_provider.script(*conversation())
        runner = runner_on(fake_provider, sessions, [ctxstore.capture.adk(given)])
        events = ask(runner, "s1", "Weather in Paris?", stream=stream)
        assert events[-1].content.parts[0].text == "Sunny in Paris."
        assert ctxstore.capture.flush(given, 10)
        stats = ctxstore.capture.stats(given)
        assert stats.failed == stats.dropped == 0, stats.last_error
        reads = faces(given)[0]
        cid = reads.lookup_key(sessions.context_key(APP, USER, "s1"))
        assert cid is not None
        calls = listed(reads, cid, 2)
        received = sent(fake_provider)
        assert len(calls) == len(received) == 2, stats
        for number, body in enumerate(received, 1):
            call = reads.call(cid, number)
            assert call.source == "adk" and call.api == "gemini.generate_content"
            assert not call.failed and not call.reconstructed and call.streamed is stream
            assert call.request == body  # key for key, as the provider parsed it
            assert call.model == "gemini-2.5-flash"
        first, second = reads.call(cid, 1), reads.call(cid, 2)
        assert first.request is not None and "Answer briefly." in json.dumps(
            first.request["systemInstruction"]
        )
        assert first.request["tools"][0]["functionDeclarations"][0]["name"] == "weather"
        assert (first.prompt_tokens, first.completion_tokens) == (20, 5)
        assert first.response_body is not None
        assert first.response_body["candidates"][0]["content"]["parts"] == [
            {"functionCall": {"name": "weather", "args": {"city": "Paris"}}}
        ]
        assert second.response_body is not None  # a stream is recorded whole, once
        assert second.response_body["candidates"][0]["content"]["parts"] == [
            {"text": "Sunny in Paris."}
        ]
        # linked to the session's version the call's input came from
        assert first.for_version < second.for_version <= reads.visible(cid).version
        assert [m.role for m in second.messages or []][-2:] == ["assistant", "tool"]


def test_a_failed_call_is_recorded_as_failed(durable_url: str, fake_provider: Any) -> None:
    with ContextStore.from_url(durable_url) as store:
        sessions = CtxStoreSessionService(store)
        fake_provider.script(Reply(status=500, text="the model is down"))
        runner = runner_on(fake_provider, sessions, [ctxstore.capture.adk(store)])
        with pytest.raises(Exception, match="the model is down"):
            ask(runner, "s2", "Weather in Paris?")
        assert ctxstore.capture.flush(store, 10)
        cid = store.lookup_key(sessions.context_key(APP, USER, "s2"))
        assert cid is not None
        (call,) = listed(store, cid, 1)
        assert call.failed and call.error and "the model is down" in call.error
        found = store.call(cid, 1)
        assert found.request == sent(fake_provider)[0]
        assert found.response_body is None
        assert store.usage_report(context_id=cid) == []  # a failed call is not billed usage


def test_capture_leaves_the_sessions_events_as_they_were(
    durable_url: str, fake_provider: Any
) -> None:
    """The same scripted run with the plugin and without: the same events, the same
    messages in the session's context (recording a call inserts none)."""
    with ContextStore.from_url(durable_url) as store:
        sessions = CtxStoreSessionService(store)
        seen = {}
        for sid, plugins in (("plain", []), ("captured", [ctxstore.capture.adk(store)])):
            fake_provider.script(*conversation())
            events = ask(runner_on(fake_provider, sessions, plugins), sid, "Weather in Paris?")
            stored = asyncio.run(sessions.get_session(app_name=APP, user_id=USER, session_id=sid))
            assert stored is not None
            cid = store.lookup_key(sessions.context_key(APP, USER, sid))
            assert cid is not None
            seen[sid] = (shown(events), shown(stored.events), store.visible(cid).to_gemini())
        assert ctxstore.capture.flush(store, 10)

        def unnamed(found: Any) -> str:  # (the function calls' ids are random)
            return re.sub(r"adk-[0-9a-f-]{36}", "ID", json.dumps(found, sort_keys=True))

        assert unnamed(seen["plain"]) == unnamed(seen["captured"])
        captured = store.lookup_key(sessions.context_key(APP, USER, "captured"))
        assert captured is not None
        assert len(listed(store, captured, 2)) == 2
        plain = store.lookup_key(sessions.context_key(APP, USER, "plain"))
        assert plain is not None
        assert store.calls(plain) == []


def test_another_session_service_records_into_a_context_per_session(fake_provider: Any) -> None:
    with ContextStore.from_url("memory://") as store:
        fake_provider.script(Reply(text="Hello."))
        runner = runner_on(fake_provider, InMemorySessionService(), [ctxstore.capture.adk(store)])
        ask(runner, "s3", "Hi")
        assert ctxstore.capture.flush(store, 10)
        cid = store.lookup_key("adk-session:s3")
        assert cid is not None
        assert cid is not None
        (call,) = listed(store, cid, 1)
        assert store.call(cid, 1).request == sent(fake_provider)[0]
        assert call.source == "adk"
