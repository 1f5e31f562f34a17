"""What capturing a model call costs the application, against the same work with capture off.

Against the local fake provider (tests/fake_provider.py: no network), on a SQLite file:
- run: an Agents SDK `Runner.run` on `CtxStoreSession` (one Responses call per run, its
  items stored by the session either way), with the session's capture on and off
  (`capture=False`); streamed too (`Runner.run_streamed`, the stream assembled whole).
- client: a bare `AsyncOpenAI.responses.create` / `chat.completions.create` with a capture
  bound around it and without: the wrapper's own cost, the SDK's work aside.
- in-process: the same client calls answered by an in-process transport (the fake
  provider's replies, no socket): what capture adds, without the network's jitter.
Blocks alternate (off, on, off, on, ...) so drift hits both; the figures are medians per
call within this one run and their ratio. Recording runs on the capture's background
thread, which shares the process (and the GIL) with the application: its cost shows up
here too. Target: capture adds well under a millisecond per call.

    python bench/bench_capture.py [--blocks 6] [--per-block 15]
"""

from __future__ import annotations

import argparse
import asyncio
import json
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


async def alternate(step: Step, blocks: int, per_block: int) -> tuple[float, float]:
    """Median seconds per call with capture off and on, blocks alternating."""
    times: dict[bool, list[float]] = {False: [], True: []}
    for on in (False, True):  # warm both paths (connections, imports, first writes)
        for _ in range(3):
            await step(on)
    for block in range(blocks * 2):
        on = block % 2 == 1
        for _ in range(per_block):
            t = time.perf_counter()
            await step(on)
            times[on].append(time.perf_counter() - t)
    return statistics.median(times[False]), statistics.median(times[True])


def report(label: str, off: float, on: float) -> None:
    print(f"{label:<34} off {off * 1000:7.2f} ms  on {on * 1000:7.2f} ms  "
          f"+{(on - off) * 1000:6.2f} ms/call  x{on / off:.2f}", flush=True)  # fmt: skip


async def bench(url: str, blocks: int, per_block: int) -> None:
    provider = FakeProvider()
    # (its replies in one segment: otherwise Nagle and delayed ACKs add 40 ms to every call)
    provider.server.RequestHandlerClass.disable_nagle_algorithm = True  # type: ignore[attr-defined]
    set_tracing_disabled(True)
    try:
        with ContextStore.from_url(url, Settings(actor="bench")) as store:
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
            assert ctxstore.capture.flush(store, 30)
            stats = ctxstore.capture.stats(store)
            print(f"recorded {stats.recorded} of {stats.submitted} captured calls "
                  f"(dropped {stats.dropped}, failed {stats.failed})")  # fmt: skip
    finally:
        provider.close()


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--blocks", type=int, default=6)
    parser.add_argument("--per-block", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'capture.db'}"
        asyncio.run(bench(url, args.blocks, args.per_block))


if __name__ == "__main__":
    main()
