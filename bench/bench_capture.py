"""What capturing a model call costs the application, against the same work with capture off.

Against the local fake provider (tests/fake_provider.py: no network), each section on a
SQLite file of its own in a temp folder:
- agents: the OpenAI Agents SDK.
  - run: a `Runner.run` on `CtxStoreSession` (one Responses call per run, its items stored
    by the session either way), with the session's capture on and off (`capture=False`);
    streamed too (`Runner.run_streamed`, the stream assembled whole).
  - client: a bare `AsyncOpenAI.responses.create` / `chat.completions.create` with a capture
    bound around it and without: the wrapper's own cost, the SDK's work aside.
  - in-process: the same client calls answered by an in-process transport (the fake
    provider's replies, no socket): what capture adds, without the network's jitter.
- langchain: `ChatOpenAI.invoke` (and `.stream`, drained) with
  `config={"callbacks": [ctxstore.capture.langchain(store)]}` and without (no thread: a
  context per top-level run, as a bare model call gets).
- adk: a Google ADK `Runner` turn (an `LlmAgent`, Gemini through google-genai) on
  `CtxStoreSessionService` with `plugins=[ctxstore.capture.adk(store)]` and without (a
  one-turn session each, created beforehand).
- llamaindex: a CustomLLM's `.chat` (the openai client to the provider) with the event
  handler on LlamaIndex's root dispatcher and without (added and taken away between
  blocks: no ctxstore handler on any dispatcher while capture is off).
- otel: the sync openai client instrumented by opentelemetry-instrumentation-genai-openai
  with ctxstore's completion hook (loaded by name: OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK
  =ctxstore, CTXSTORE_URL) and the same instrumentation without a hook (instrumented again
  between blocks), in one workflow with a conversation id. With a hook the util also
  captures the messages' content: that is part of what turning the hook on costs.
- faults: LangChain's `ChatOpenAI.invoke` captured into PostgreSQL on a private cluster
  that is up, then stopped, then frozen (SIGSTOP), against the same calls uncaptured: the
  extra latency per call while the store is away (every call recorded once it is back).
- claude: `CtxStoreSessionStore.append` of a [user, assistant] pair, the assistant's message
  with its usage (its call reconstructed and recorded in the append's commit) and without
  (no call recorded): the reconstructed calls' cost (a session per block).
Blocks alternate (off, on, off, on, ...) so drift hits both; the figures are medians per
call within this one run and their ratio. Recording runs on the capture's background
thread, which shares the process (and the GIL) with the application: its cost shows up
here too. Every captured call is flushed and counted: each section asserts that what it
captured was all recorded. Target: capture adds well under a millisecond per call.

    python bench/bench_capture.py [--blocks 4] [--per-block 10] [--only langchain ...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx2
from agents import Agent, Runner, set_tracing_disabled
from agents.memory import SessionSettings
from agents.models.openai_responses import OpenAIResponsesModel
from openai import AsyncOpenAI

import ctxstore.capture
from ctxstore.adapters.capture import openai_client
from ctxstore.adapters.capture.openai_client import Binding
from ctxstore.adapters.capture.recorder import recorder_for
from ctxstore.adapters.integrations.agents_session import CtxStoreSession
from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore

# the repository's root, for the tests' fake provider (tests/fake_provider.py)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.fake_provider import FakeProvider

Step = Callable[[bool], Awaitable[Any]]
Switch = Callable[[bool], None]
WARM = 3  # calls per side before timing


async def alternate(
    step: Step, blocks: int, per_block: int, switch: Switch | None = None
) -> tuple[float, float]:
    """Median seconds per call with capture off and on, blocks alternating; `switch` turns
    capture on or off before each block (untimed)."""
    times: dict[bool, list[float]] = {False: [], True: []}
    for on in (False, True):  # warm both paths (connections, imports, first writes)
        if switch is not None:
            switch(on)
        for _ in range(WARM):
            await step(on)
    for block in range(blocks * 2):
        on = block % 2 == 1
        if switch is not None:
            switch(on)
        for _ in range(per_block):
            t = time.perf_counter()
            await step(on)
            times[on].append(time.perf_counter() - t)
    return statistics.median(times[False]), statistics.median(times[True])


def captured(blocks: int, per_block: int) -> int:
    """The calls `alternate` makes with capture on."""
    return WARM + blocks * per_block


def report(label: str, off: float, on: float) -> None:
    print(f"{label:<34} off {off * 1000:7.2f} ms  on {on * 1000:7.2f} ms  "
          f"+{(on - off) * 1000:6.2f} ms/call  x{on / off:.2f}", flush=True)  # fmt: skip


def counted(section: str, store: Any, expected: int | None = None) -> None:
    """Every call captured for `store` recorded: none dropped, none failed, none missing."""
    assert ctxstore.capture.flush(store, 60), f"{section}: capture not flushed"
    stats = ctxstore.capture.stats(store)
    print(f"{section}: recorded {stats.recorded} of {stats.submitted} captured calls "
          f"(dropped {stats.dropped}, failed {stats.failed})", flush=True)  # fmt: skip
    assert stats.dropped == stats.failed == 0, stats.last_error
    assert stats.recorded == stats.submitted, stats
    assert expected is None or stats.submitted == expected, (stats, expected)


def opened(tmp: Path, name: str) -> ContextStore:
    return ContextStore.from_url(f"sqlite:///{tmp / name}.db", Settings(actor="bench"))


# ---- OpenAI Agents SDK and the openai client --------------------------------------------


async def bench_agents(tmp: Path, provider: FakeProvider, blocks: int, per_block: int) -> None:
    set_tracing_disabled(True)
    with opened(tmp, "agents") as store:
        client = AsyncOpenAI(base_url=provider.url + "/v1", api_key="x", max_retries=0)
        agent = Agent(name="bench", instructions="Be brief.",
                      model=OpenAIResponsesModel("gpt-4o", client))  # fmt: skip
        # (the latest items only: every run sends the same amount, however many ran)
        sessions = {
            on: CtxStoreSession(f"bench-{on}", store, capture=on,
                                session_settings=SessionSettings(limit=4))
            for on in (False, True)
        }  # fmt: skip

        async def run(on: bool) -> Any:
            return await Runner.run(agent, "Hello", session=sessions[on])

        async def streamed(on: bool) -> Any:
            result = Runner.run_streamed(agent, "Hello", session=sessions[on])
            async for _ in result.stream_events():
                pass

        cid = store.context_for_key("bench-client")
        binding = Binding(recorder_for(store), cid)

        def bare(call: Callable[[], Awaitable[Any]]) -> Step:
            async def step(on: bool) -> Any:
                openai_client.bind(binding if on else None)
                try:
                    return await call()
                finally:
                    openai_client.bind(None)

            return step

        openai_client.install()
        responses = bare(lambda: client.responses.create(model="gpt-4o", input="Hello"))
        chat = bare(lambda: client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "Hello"}]))  # fmt: skip
        chat_stream = bare(lambda: _drain(client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "Hello"}],
            stream=True)))  # fmt: skip

        local = AsyncOpenAI(base_url="http://fake/v1", api_key="x", max_retries=0,
                            http_client=httpx2.AsyncClient(transport=_in_process()))  # fmt: skip
        local_chat = bare(lambda: local.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "Hello"}]))  # fmt: skip
        local_stream = bare(lambda: _drain(local.responses.create(
            model="gpt-4o", input="Hello", stream=True)))  # fmt: skip
        for label, step, times in (
            ("in-process chat.completions", local_chat, 10),
            ("in-process responses, streamed", local_stream, 10),
        ):
            report(label, *await alternate(step, blocks, per_block * times))
        for label, step in (
            ("Runner.run on CtxStoreSession", run),
            ("Runner.run_streamed on the session", streamed),
            ("client responses.create", responses),
            ("client chat.completions.create", chat),
            ("client chat, streamed", chat_stream),
        ):
            report(label, *await alternate(step, blocks, per_block))
        counted("agents", store,
                captured(blocks, per_block * 10) * 2 + captured(blocks, per_block) * 5)  # fmt: skip


def _in_process() -> httpx2.MockTransport:
    """The fake provider's replies, answered without a socket."""
    from tests.fake_provider import Reply, _chat, _response, _response_events

    def answer(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        if request.url.path.endswith("/chat/completions"):
            return httpx2.Response(200, json=_chat(body, Reply(), 1))
        events = _response_events(_response(body, Reply(), 1))
        sse = "".join(f"data: {json.dumps(e)}\n\n" for e in events)
        return httpx2.Response(200, content=sse.encode(),
                               headers={"content-type": "text/event-stream"})  # fmt: skip

    return httpx2.MockTransport(answer)


async def _drain(started: Awaitable[Any]) -> None:
    async for _ in await started:
        pass


# ---- LangChain ----------------------------------------------------------------------------


async def bench_langchain(tmp: Path, provider: FakeProvider, blocks: int, per_block: int) -> None:
    from langchain_openai import ChatOpenAI

    with opened(tmp, "langchain") as store:
        model = ChatOpenAI(model="gpt-4o", base_url=provider.url + "/v1", api_key="x",
                           max_retries=0)  # fmt: skip
        configs: dict[bool, Any] = {
            False: {}, True: {"callbacks": [ctxstore.capture.langchain(store)]}
        }  # fmt: skip

        async def invoke(on: bool) -> Any:
            return model.invoke("Hello", config=configs[on])

        async def stream(on: bool) -> Any:
            for _ in model.stream("Hello", config=configs[on]):
                pass

        report("ChatOpenAI.invoke", *await alternate(invoke, blocks, per_block))
        report("ChatOpenAI.stream", *await alternate(stream, blocks, per_block))
        counted("langchain", store, captured(blocks, per_block) * 2)


# ---- Google ADK ---------------------------------------------------------------------------


async def bench_adk(tmp: Path, provider: FakeProvider, blocks: int, per_block: int) -> None:
    from google import genai
    from google.adk.agents import LlmAgent
    from google.adk.models.google_llm import Gemini
    from google.adk.runners import Runner as AdkRunner
    from google.genai import types

    from ctxstore.adapters.integrations.adk_session_service import CtxStoreSessionService

    app, user = "bench", "u"
    with opened(tmp, "adk") as store:
        sessions = CtxStoreSessionService(store)

        def runner(plugins: list[Any]) -> AdkRunner:
            client = genai.Client(
                api_key="x", http_options=types.HttpOptions(base_url=provider.url)
            )
            agent = LlmAgent(name="bench", instruction="Be brief.",
                             model=Gemini(model="gemini-2.5-flash", client=client))  # fmt: skip
            return AdkRunner(agent=agent, app_name=app, session_service=sessions,
                             plugins=plugins)  # fmt: skip

        runners = {False: runner([]), True: runner([ctxstore.capture.adk(store)])}
        turns = captured(blocks, per_block)
        pending: dict[bool, list[str]] = {on: [] for on in (False, True)}
        for on in (False, True):  # a one-turn session per call, made beforehand (untimed)
            for n in range(turns):
                sid = f"s-{on}-{n}"
                await sessions.create_session(app_name=app, user_id=user, session_id=sid)
                pending[on].append(sid)
        message = types.Content(role="user", parts=[types.Part(text="Hello")])

        async def turn(on: bool) -> Any:
            sid = pending[on].pop()
            async for _ in runners[on].run_async(user_id=user, session_id=sid,
                                                 new_message=message):  # fmt: skip
                pass

        report("Runner.run_async, one turn", *await alternate(turn, blocks, per_block))
        counted("adk", store, turns)


# ---- LlamaIndex ---------------------------------------------------------------------------


async def bench_llamaindex(tmp: Path, provider: FakeProvider, blocks: int, per_block: int) -> None:
    from llama_index.core.base.llms.types import ChatMessage
    from llama_index_instrumentation import get_dispatcher, root_manager

    from ctxstore.adapters.capture.llamaindex import event_handler

    root = get_dispatcher()

    def ours() -> list[Any]:  # ctxstore's handlers on every dispatcher there is
        return [h for d in root_manager.dispatchers.values() for h in d.event_handlers
                if type(h).__module__.startswith("ctxstore")]  # fmt: skip

    assert not ours()
    with opened(tmp, "llamaindex") as store:
        handler = ctxstore.capture.llamaindex(store)
        assert isinstance(handler, event_handler(store).__class__)
        llm = _provider_llm(provider.url + "/v1")
        messages = [ChatMessage(role="user", content="Hello")]

        def switch(on: bool) -> None:
            if on:
                root.add_event_handler(handler)
            elif handler in root.event_handlers:
                root.event_handlers.remove(handler)
            assert ours() == ([handler] if on else []), ours()

        async def chat(on: bool) -> Any:
            return llm.chat(messages)

        try:
            report("CustomLLM.chat", *await alternate(chat, blocks, per_block, switch))
        finally:
            switch(False)
        counted("llamaindex", store, captured(blocks, per_block))


def _provider_llm(base_url: str) -> Any:
    """A chat LLM sending its messages to a chat-completions endpoint as they are, its raw
    reply kept (the capture tests' own, tests/fake_llamaindex.py)."""
    from tests.fake_llamaindex import ProviderLLM

    return ProviderLLM(base_url=base_url)


# ---- OpenTelemetry ------------------------------------------------------------------------


async def bench_otel(tmp: Path, provider: FakeProvider, blocks: int, per_block: int) -> None:
    import openai
    from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.util.genai.completion_hook import load_completion_hook
    from opentelemetry.util.genai.handler import TelemetryHandler

    from ctxstore.adapters.capture import otel

    name, url = "OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK", f"sqlite:///{tmp / 'otel.db'}"
    saved = {k: os.environ.get(k) for k in (name, "CTXSTORE_URL")}
    os.environ.update({name: "ctxstore", "CTXSTORE_URL": url})
    otel._env = None
    hook = load_completion_hook()  # by its name, as an application gets it
    ours = getattr(hook, "_wrapped", None)
    assert isinstance(ours, otel.CompletionHook), hook
    del os.environ[name]  # the same instrumentation without it: the util's no-op hook
    tracer = TracerProvider()
    instrumentor = OpenAIInstrumentor()
    client = openai.OpenAI(base_url=provider.url + "/v1", api_key="x", max_retries=0)
    messages: Any = [{"role": "user", "content": "Hello"}]

    def switch(on: bool) -> None:
        if instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.uninstrument()
        if on:
            instrumentor.instrument(tracer_provider=tracer, completion_hook=hook)
        else:
            instrumentor.instrument(tracer_provider=tracer)

    async def chat(on: bool) -> Any:
        return client.chat.completions.create(model="gpt-4o", messages=messages)

    try:
        with TelemetryHandler(tracer_provider=tracer).workflow("bench", conversation_id="bench"):
            report("instrumented chat.completions", *await alternate(chat, blocks, per_block,
                                                                       switch))  # fmt: skip
        assert ours.flush(60), "otel: capture not flushed"
        counted("otel", ours.recorder.store, captured(blocks, per_block))
    finally:
        if instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.uninstrument()
        if otel._env is not None and otel._env._opened is not None:
            otel._env._opened.close()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


# ---- Claude Agent SDK ---------------------------------------------------------------------


async def bench_claude(tmp: Path, provider: FakeProvider, blocks: int, per_block: int) -> None:
    from ctxstore.adapters.integrations.claude_session_store import CtxStoreSessionStore

    with opened(tmp, "claude") as store:
        sessions = CtxStoreSessionStore(store)
        keys: dict[bool, list[dict[str, Any]]] = {False: [], True: []}
        made = 0

        def switch(on: bool) -> None:  # a transcript per block
            keys[on].append({"project_key": "bench", "session_id": f"s-{on}-{len(keys[on])}"})

        async def append(on: bool) -> Any:
            nonlocal made
            made += 1
            message: dict[str, Any] = {
                "id": f"msg_{made}", "type": "message", "role": "assistant",
                "model": "claude-sonnet-4-5", "content": [{"type": "text", "text": "ok"}],
                "stop_reason": "end_turn", "stop_sequence": None,
            }  # fmt: skip
            if on:
                message["usage"] = {"input_tokens": 11, "cache_read_input_tokens": 50,
                                    "output_tokens": 7}  # fmt: skip
            entries = [
                {"type": "user", "uuid": f"u{made}",
                 "message": {"role": "user", "content": "Hello"}},
                {"type": "assistant", "uuid": f"a{made}", "requestId": f"req_{made}",
                 "message": message},
            ]  # fmt: skip
            await sessions.append(keys[on][-1], entries)

        report("SessionStore.append, a turn", *await alternate(append, blocks, per_block,
                                                                switch))  # fmt: skip
        found = {}
        for on in (False, True):
            found[on] = 0
            for key in keys[on]:
                cid = sessions._id(key)
                assert cid is not None, key
                found[on] += len(store.calls(cid))
        expected = captured(blocks, per_block)
        print(f"claude: recorded {found[True]} of {expected} reconstructed calls "
              f"({found[False]} without usage)", flush=True)  # fmt: skip
        assert (found[False], found[True]) == (0, expected), found


# ---- the store away: down, frozen -----------------------------------------------------------


async def bench_faults(tmp: Path, provider: FakeProvider, blocks: int, per_block: int) -> None:
    """`ChatOpenAI.invoke` captured into PostgreSQL on a private cluster (bench/pg_cluster.py)
    that is up, stopped (nothing listens) and frozen (SIGSTOP: connections open, nothing
    answers), against the same calls uncaptured: what the store's absence costs the
    application per call. Every call is recorded once the cluster is back."""
    import pg_cluster
    from langchain_openai import ChatOpenAI

    if not pg_cluster.available():
        print("faults: skipped (PostgreSQL 15's initdb and pg_ctl are not installed)")
        return
    model = ChatOpenAI(model="gpt-4o", base_url=provider.url + "/v1", api_key="x",
                       max_retries=0)  # fmt: skip
    with pg_cluster.private_cluster() as cluster:
        store = ContextStore.from_url(cluster.url, Settings(actor="bench"))
        configs: dict[bool, Any] = {
            False: {}, True: {"callbacks": [ctxstore.capture.langchain(store)]}
        }  # fmt: skip

        async def invoke(on: bool) -> Any:
            return model.invoke("Hello", config=configs[on])

        try:
            for state, away, back in (
                ("up", None, None),
                ("stopped", cluster.stop, cluster.start),
                ("frozen", cluster.freeze, cluster.thaw),
            ):
                if away is not None:
                    away()
                try:
                    report(f"ChatOpenAI.invoke, store {state}",
                           *await alternate(invoke, blocks, per_block))  # fmt: skip
                finally:
                    if back is not None:
                        back()
                assert ctxstore.capture.flush(store, 120), f"faults: {state} not flushed"
            counted("faults", store, captured(blocks, per_block) * 3)
        finally:
            store.close()


# -------------------------------------------------------------------------------------------

Section = Callable[[Path, FakeProvider, int, int], Awaitable[None]]
SECTIONS: dict[str, Section] = {
    "agents": bench_agents, "langchain": bench_langchain, "adk": bench_adk,
    "llamaindex": bench_llamaindex, "otel": bench_otel, "claude": bench_claude,
    "faults": bench_faults,
}  # fmt: skip


async def bench(tmp: Path, only: list[str], blocks: int, per_block: int) -> None:
    provider = FakeProvider()
    # (its replies in one segment: otherwise Nagle and delayed ACKs add 40 ms to every call)
    provider.server.RequestHandlerClass.disable_nagle_algorithm = True  # type: ignore[attr-defined]
    try:
        for name in only:
            await SECTIONS[name](tmp, provider, blocks, per_block)
    finally:
        provider.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--blocks", type=int, default=4)
    parser.add_argument("--per-block", type=int, default=10)
    parser.add_argument("--only", action="append", choices=list(SECTIONS),
                        help="a section to run (repeatable; default: all)")  # fmt: skip
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(bench(Path(tmp), args.only or list(SECTIONS), args.blocks, args.per_block))


if __name__ == "__main__":
    main()
