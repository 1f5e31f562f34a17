"""Capture through OpenTelemetry: the real GenAI instrumentations (OpenAI, Anthropic) call
ctxstore's completion hook, loaded by name from its entry point
(OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK=ctxstore, CTXSTORE_URL), driving the real SDK
clients against the local fake provider; the recorded request is compared with the body the
provider received. What the GenAI messages cannot carry is left out of the comparison:
transport keys (`stream`, `stream_options`) and `max_tokens` vs `max_completion_tokens`
(the span has one `gen_ai.request.max_tokens`). Pydantic AI reaches capture through its own
spans and `ctxstore.capture.otel_span_processor`. ctxstore's own operations make spans shaped
as the GenAI memory conventions, and with nothing configured `opentelemetry` is not imported.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.util.genai")
pytest.importorskip("opentelemetry.instrumentation.genai.openai")

import anthropic
import openai
from opentelemetry.instrumentation.genai.anthropic import AnthropicInstrumentor
from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.util.genai.completion_hook import load_completion_hook
from opentelemetry.util.genai.handler import TelemetryHandler

import ctxstore
from ctxstore.adapters.capture import otel
from tests.fake_provider import Reply

ROOT = Path(__file__).resolve().parents[2]
TRANSPORT = ("stream", "stream_options")
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}}]  # fmt: skip


def _sent(body: dict) -> dict:
    return {k: v for k, v in body.items() if k not in TRANSPORT}


@pytest.fixture
def hooked(durable_url, monkeypatch):
    """The completion hook as the util loads it by name, writing to CTXSTORE_URL."""
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK", "ctxstore")
    monkeypatch.setenv("CTXSTORE_URL", durable_url)
    monkeypatch.setattr(otel, "_env", None)
    hook = load_completion_hook()
    assert isinstance(getattr(hook, "_wrapped", None), otel.CompletionHook)  # by its name
    tracer = TracerProvider()
    yield hook, tracer
    hook._wrapped.flush(20)
    if otel._env is not None and otel._env._opened is not None:
        otel._env._opened.close()


@pytest.fixture
def openai_client(hooked, fake_provider):
    hook, tracer = hooked
    OpenAIInstrumentor().instrument(tracer_provider=tracer, completion_hook=hook)
    yield openai.OpenAI(base_url=fake_provider.url + "/v1", api_key="k", max_retries=0)
    OpenAIInstrumentor().uninstrument()


def _recorded(url: str, key: str, hook) -> list:
    assert hook._wrapped.flush(20)
    with ctxstore.open(url) as store:
        cid = store.lookup_key(key)
        assert cid is not None, f"no context for {key}"
        return [store.call(cid, i) for i in range(1, len(store.calls(cid)) + 1)]


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_openai_chat_calls_are_recorded_as_the_provider_received_them(
    durable_url, hooked, openai_client, fake_provider, streamed
):
    hook, tracer = hooked
    fake_provider.script(Reply(tool="get_weather", arguments={"city": "Paris"}),
                         Reply(text="14 degrees."))  # fmt: skip
    first = [{"role": "system", "content": "Be brief."},
             {"role": "user", "content": "Weather in Paris?"}]  # fmt: skip
    second = [*first,
              {"role": "assistant", "content": None, "tool_calls": [{
                  "id": "call_1", "type": "function",
                  "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
              {"role": "tool", "tool_call_id": "call_1", "content": "14 degrees"}]  # fmt: skip
    extra = {"stream": True, "stream_options": {"include_usage": True}} if streamed else {}
    with TelemetryHandler(tracer_provider=tracer).workflow("chat", conversation_id="conv-7"):
        for messages in (first, second):
            reply = openai_client.chat.completions.create(
                model="gpt-4o",
                messages=messages,
                tools=TOOLS,
                temperature=0.2,
                seed=7,
                **extra,
            )
            if streamed:
                list(reply)
    calls = _recorded(durable_url, "conv-7", hook)
    received = fake_provider.bodies("/chat/completions")
    assert [c.request for c in calls] == [_sent(b) for b in received]  # key for key
    assert [c.source for c in calls] == ["otel", "otel"]
    assert [c.streamed for c in calls] == [streamed, streamed]
    assert calls[0].model == "gpt-4o" and calls[0].prompt_tokens == 11
    assert calls[0].completion_tokens == 7 and not calls[0].failed
    tool_calls = calls[0].response_body["choices"][0]["message"]["tool_calls"]
    assert tool_calls[0]["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    assert calls[1].response_body["choices"][0]["message"]["content"] == "14 degrees."


def test_a_failed_call_is_recorded_as_failed_with_its_error(
    durable_url, hooked, openai_client, fake_provider
):
    hook, tracer = hooked
    fake_provider.script(Reply(status=500, text="the provider is down"))
    with (
        TelemetryHandler(tracer_provider=tracer).workflow("chat", conversation_id="conv-f"),
        pytest.raises(openai.InternalServerError),
    ):
        openai_client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "Hi"}]
        )
    (call,) = _recorded(durable_url, "conv-f", hook)
    assert call.failed and call.response_body is None
    assert "InternalServerError" in call.error and "the provider is down" in call.error
    assert call.request == fake_provider.bodies("/chat/completions")[0]


def test_openai_responses_calls_are_recorded(durable_url, hooked, openai_client, fake_provider):
    hook, tracer = hooked
    with TelemetryHandler(tracer_provider=tracer).workflow("r", conversation_id="conv-r"):
        openai_client.responses.create(
            model="gpt-4o", instructions="Be brief.", temperature=0.5,
            input=[{"role": "user", "content": "Weather in Paris?"}],
        )  # fmt: skip
    (call,) = _recorded(durable_url, "conv-r", hook)
    assert call.api == "openai.responses"
    assert call.request == _sent(fake_provider.bodies("/responses")[0])
    assert call.response_body["output"][0]["content"][0]["text"] == "ok"


def test_anthropic_calls_are_recorded(durable_url, hooked, fake_provider):
    hook, tracer = hooked
    AnthropicInstrumentor().instrument(tracer_provider=tracer, completion_hook=hook)
    try:
        client = anthropic.Anthropic(base_url=fake_provider.url, api_key="k", max_retries=0)
        tools = [{"name": "get_weather", "description": "The weather in a city.",
                  "input_schema": {"type": "object"}}]  # fmt: skip
        with TelemetryHandler(tracer_provider=tracer).workflow("a", conversation_id="conv-a"):
            client.messages.create(
                model="claude-sonnet-4-5", max_tokens=256, system="Be brief.", tools=tools,
                messages=[{"role": "user", "content": "Weather in Paris?"},
                          {"role": "assistant", "content": [{"type": "tool_use", "id": "tu_1",
                           "name": "get_weather", "input": {"city": "Paris"}}]},
                          {"role": "user", "content": [{"type": "tool_result",
                           "tool_use_id": "tu_1", "content": "14 degrees"}]}],
            )  # fmt: skip
    finally:
        AnthropicInstrumentor().uninstrument()
    (call,) = _recorded(durable_url, "conv-a", hook)
    assert call.api == "anthropic.messages"
    assert call.request == _sent(fake_provider.bodies("/messages")[0])
    assert call.prompt_tokens == 11 and call.response_body["content"][0]["text"] == "ok"


def test_malformed_messages_record_what_they_can_and_never_raise(caplog):
    from opentelemetry.util.genai.types import InputMessage, TextPart, ToolCallRequestPart

    store = ctxstore.open("memory://")
    hook = otel.CompletionHook(store)
    odd = InputMessage(role="user", parts=[TextPart(content="Hi"), {"type": "hologram"}])
    with caplog.at_level(logging.INFO, logger="ctxstore.capture"):
        hook.on_completion(inputs=[odd, {"role": "user"}, "junk"], outputs=[],
                           system_instruction=[], span=None)  # fmt: skip
        huge = ToolCallRequestPart(arguments={"x": "y" * (17 * 1024 * 1024)}, name="f", id="1")
        hook.on_completion(inputs=[InputMessage(role="assistant", parts=[huge])], outputs=[],
                           system_instruction=[])  # fmt: skip
        hook.on_completion(inputs=None, outputs=None, system_instruction=None)
        assert hook.flush(10)  # inside: the hook's worker logs at INFO only while this holds
    (summary,) = [c for c in store.contexts() if store.calls(c.context_id)]
    (call,) = [store.call(summary.context_id, 1)]
    assert call.request["messages"] == [
        {"role": "user", "parts": [{"type": "text", "content": "Hi"}, {"type": "hologram"}]}
    ]  # no provider named: the GenAI messages as they came
    assert call.failed  # no reply and no error: never recorded as a success
    assert "without parts" in caplog.text and "not recorded" in caplog.text


def test_pydantic_ai_reaches_capture_through_its_spans(durable_url, fake_provider):
    pydantic_ai = pytest.importorskip("pydantic_ai")
    from pydantic_ai.capabilities import Instrumentation
    from pydantic_ai.models.instrumented import InstrumentationSettings
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from ctxstore.capture import otel_span_processor

    with ctxstore.open(durable_url) as store:
        tracer = TracerProvider()
        tracer.add_span_processor(otel_span_processor(store))
        model = OpenAIChatModel(
            "gpt-4o", provider=OpenAIProvider(base_url=fake_provider.url + "/v1", api_key="k")
        )
        settings = InstrumentationSettings(tracer_provider=tracer, include_content=True)
        agent = pydantic_ai.Agent(
            model, instructions="Be brief.", capabilities=[Instrumentation(settings=settings)]
        )
        assert agent.run_sync("Weather in Paris?").output == "ok"
        assert tracer.force_flush(40_000)
        found = [c for c in store.contexts() if c.name and store.calls(c.context_id)]
        found = found or [c for c in store.contexts() if store.calls(c.context_id)]
        (call,) = [store.call(found[0].context_id, 1)]
    received = fake_provider.bodies("/chat/completions")[0]
    assert call.source == "otel" and call.api == "openai.chat"
    assert call.request["messages"] == received["messages"]
    assert call.request["model"] == received["model"] and call.prompt_tokens == 11


def _run(code: str, **env: str) -> str:
    import os

    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], check=False, capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT.parent), **env}, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_the_hook_is_loaded_by_name_in_an_application_that_changes_nothing(tmp_path, fake_provider):
    """No tracer provider, no ctxstore import in the application: the env vars alone."""
    url = f"sqlite:///{tmp_path / 'app.db'}"
    out = _run(
        f"""
        import openai
        from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor
        from opentelemetry.util.genai.handler import TelemetryHandler
        OpenAIInstrumentor().instrument()
        client = openai.OpenAI(base_url="{fake_provider.url}/v1", api_key="k")
        with TelemetryHandler().workflow("app", conversation_id="app-conv"):
            client.chat.completions.create(
                model="gpt-4o", messages=[{{"role": "user", "content": "Hi"}}])
        print("done")
        """,
        OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK="ctxstore", CTXSTORE_URL=url,
    )  # fmt: skip
    assert "done" in out  # the calls are flushed at exit
    with ctxstore.open(url) as store:
        cid = store.lookup_key("app-conv")
        assert cid is not None
        call = store.call(cid, 1)
    assert call.request == fake_provider.bodies("/chat/completions")[0]
    assert call.model == "gpt-4o" and call.completion_tokens == 7  # without a tracer provider


OPS = """\
    import ctxstore, sys, tempfile
    store = ctxstore.open(f"sqlite:///{tempfile.mkdtemp()}/ops.db")
    cid = store.create()
    w = store.insert(cid, [{"role": "user", "content": "secret"}])
    store.delete(cid, w.ids)
    store.erase(cid, reason="test")
"""


def test_nothing_configured_imports_no_opentelemetry():
    out = _run(
        textwrap.dedent(OPS)
        + "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))"
    )
    assert out.strip() == "[]"


@pytest.mark.parametrize("content", [False, True], ids=["no-content", "content"])
def test_ctxstore_operations_make_memory_spans(content):
    setup = """
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
    """
    show = """
    import json
    print(json.dumps([[s.name, dict(s.attributes)] for s in exporter.get_finished_spans()]))
    """
    env = {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"} if content else {}
    out = _run(textwrap.dedent(setup) + textwrap.dedent(OPS) + textwrap.dedent(show), **env)
    spans = json.loads(out.strip().splitlines()[-1])
    assert [(n, a["ctxstore.operation"]) for n, a in spans] == [
        ("update_memory ctxstore", "insert"), ("delete_memory ctxstore", "delete"),
        ("delete_memory ctxstore", "erase"),
    ]  # fmt: skip
    insert = spans[0][1]
    assert insert["gen_ai.operation.name"] == "update_memory"
    assert len(insert["gen_ai.memory.store.id"]) == 36 and insert["ctxstore.context.version"] >= 1
    assert ("secret" in insert.get("gen_ai.memory.content", "")) is content
