"""Streamed replies in the domain: deltas in every shape (neutral, and the providers' own
stream events, checked against what the SDKs themselves accumulate from the same events),
replay, and the repair policy prompts apply to a reply that did not finish."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

import anthropic
import pytest
from anthropic.types import MessageParam, RawMessageStreamEvent
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.lib.streaming.chat._completions import ChatCompletionStreamState
from openai.types.chat import ChatCompletionChunk
from pydantic import TypeAdapter

from ctxstore.domain.context import Context
from ctxstore.domain.errors import InvalidMessageError, InvalidOperationError, UnknownMessageError
from ctxstore.domain.stream_repair import repair
from ctxstore.domain.streaming import INCOMPLETE, incomplete_state, neutral_deltas
from ctxstore.projections.visible import replay, visible_of

from ..conftest import examples


def new_context(shape: str = "openai-chat") -> Context:
    c = Context.start(name="s", metadata=None, actor="a")
    c.insert({"role": "user", "content": "hi"}, actor="a", format=shape)
    return c


def replayed(c: Context) -> Context:
    return replay(cast(list[Context.Event], c.collect_events()))


# ---- Chat Completions chunks, against the OpenAI SDK's own accumulation ----------------


def chat_chunks(text: str, args: str) -> list[dict]:
    base = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o"}
    out = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}]
    for i in range(0, len(text), 7):
        out.append({**base, "choices": [{"index": 0, "delta": {"content": text[i : i + 7]}}]})
    start = {"index": 0, "id": "call_1", "type": "function",
             "function": {"name": "lookup", "arguments": ""}}  # fmt: skip
    out.append({**base, "choices": [{"index": 0, "delta": {"tool_calls": [start]}}]})
    for i in range(0, len(args), 5):
        part = {"index": 0, "function": {"arguments": args[i : i + 5]}}
        out.append({**base, "choices": [{"index": 0, "delta": {"tool_calls": [part]}}]})
    out.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    return out


def test_chat_chunks_build_what_the_openai_sdk_accumulates():
    text = "Let me look that up — ünïcode and 日本語 too. "
    args = json.dumps({"city": "Zürich", "days": 3})
    chunks = [ChatCompletionChunk.model_validate(c) for c in chat_chunks(text, args)]
    state = ChatCompletionStreamState()
    for chunk in chunks:
        state.handle_chunk(chunk)
    sdk = state.get_final_completion().choices[0].message

    c = new_context()
    reply = c.begin({"role": "assistant", "content": ""}, actor="a")
    for n in range(0, len(chunks), 4):  # SDK objects, a few per append
        c.append(reply, neutral_deltas(chunks[n : n + 4]), actor="a")
    c.finish(reply, actor="a")
    stored = c.stored_message(reply)
    assert stored["content"] == sdk.content == text
    assert stored["tool_calls"] == [
        {"id": t.id, "type": "function",
         "function": {"name": t.function.name, "arguments": t.function.arguments}}
        for t in sdk.tool_calls or []
    ]  # fmt: skip
    assert INCOMPLETE not in stored["metadata"]
    assert replayed(c).stored_message(reply) == stored


# ---- Anthropic stream events, against the Anthropic SDK's own accumulation -------------


def anthropic_events(text: str, thinking: str, args: str) -> list[dict]:
    message: dict[str, Any] = {"id": "m", "type": "message", "role": "assistant", "content": [],
               "model": "claude-sonnet-4-5", "stop_reason": None, "stop_sequence": None,
               "usage": {"input_tokens": 5, "output_tokens": 1}}  # fmt: skip
    ev: list[dict] = [{"type": "message_start", "message": message}]
    ev.append({"type": "content_block_start", "index": 0,
               "content_block": {"type": "thinking", "thinking": "", "signature": ""}})  # fmt: skip
    for i in range(0, len(thinking), 6):
        ev.append({"type": "content_block_delta", "index": 0,
                   "delta": {"type": "thinking_delta", "thinking": thinking[i : i + 6]}})  # fmt: skip
    ev.append({"type": "content_block_delta", "index": 0,
               "delta": {"type": "signature_delta", "signature": "c2ln"}})  # fmt: skip
    ev.append({"type": "content_block_stop", "index": 0})
    ev.append({"type": "content_block_start", "index": 1,
               "content_block": {"type": "text", "text": ""}})  # fmt: skip
    for i in range(0, len(text), 6):
        ev.append({"type": "content_block_delta", "index": 1,
                   "delta": {"type": "text_delta", "text": text[i : i + 6]}})  # fmt: skip
    ev.append({"type": "content_block_stop", "index": 1})
    ev.append({"type": "content_block_start", "index": 2,
               "content_block": {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}})  # fmt: skip
    for i in range(0, len(args), 4):
        ev.append({"type": "content_block_delta", "index": 2,
                   "delta": {"type": "input_json_delta", "partial_json": args[i : i + 4]}})  # fmt: skip
    ev.append({"type": "content_block_stop", "index": 2})
    ev.append({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
               "usage": {"output_tokens": 30}})  # fmt: skip
    ev.append({"type": "message_stop"})
    return ev


@contextmanager
def answering(body: bytes) -> Iterator[str]:
    """A loopback server answering every POST with these server-sent events; its root URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def anthropic_sdk_accumulates(raw: list[dict]) -> Any:
    """The message the Anthropic SDK's public stream builds from these events, sent to its
    client over HTTP (its accumulator's private signature, and the HTTP package it is built
    on, change between majors; messages.stream does not)."""
    body = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in raw).encode()
    hello: list[MessageParam] = [{"role": "user", "content": "When?"}]
    with (
        answering(body) as url,
        anthropic.Anthropic(api_key="k", base_url=url) as client,
        client.messages.stream(model="claude-sonnet-4-6", max_tokens=64, messages=hello) as s,
    ):
        return s.get_final_message()


def test_anthropic_events_build_what_the_anthropic_sdk_accumulates():
    args = json.dumps({"query": "événement", "n": [1, 2]})
    raw = anthropic_events("Checking the calendar. ", "The user wants a date.", args)
    adapter: TypeAdapter = TypeAdapter(RawMessageStreamEvent)
    events = [adapter.validate_python(e) for e in raw]
    snapshot = anthropic_sdk_accumulates(raw)
    sdk_blocks = [b.model_dump(mode="json", exclude_none=True) for b in snapshot.content]

    c = new_context("anthropic")
    reply = c.begin({"role": "assistant", "content": ""}, actor="a", format="anthropic")
    c.append(reply, neutral_deltas(events[:9]), actor="a")
    mid = c.stored_message(reply)
    assert incomplete_state(mid) == "streaming"
    c.append(reply, neutral_deltas(events[9:]), actor="a")
    c.finish(reply, actor="a")
    blocks = c.stored_message(reply)["native"]["content"]
    strip = ("citations", "caller")  # fields the SDK's models add as null
    assert [{k: v for k, v in b.items() if k not in strip} for b in blocks] == [
        {k: v for k, v in b.items() if k not in strip} for b in sdk_blocks
    ]
    assert blocks[2]["input"] == json.loads(args)
    assert replayed(c).stored_message(reply) == c.stored_message(reply)


def test_anthropic_finish_refuses_tool_input_that_is_not_complete_json():
    c = new_context("anthropic")
    reply = c.begin({"role": "assistant", "content": ""}, actor="a", format="anthropic")
    events = anthropic_events("x", "y", '{"a": 1}')[:-4]  # the input stops half way
    c.append(reply, neutral_deltas(events), actor="a")
    with pytest.raises(InvalidMessageError, match="not complete JSON"):
        c.finish(reply, actor="a")
    assert incomplete_state(c.stored_message(reply)) == "streaming"


# ---- Responses items --------------------------------------------------------------------


def test_responses_items_stream_from_their_events():
    c = new_context("openai-responses")
    item = {"type": "message", "id": "msg_1", "role": "assistant", "status": "in_progress",
            "content": []}  # fmt: skip
    reply = c.begin(item, actor="a")
    events = [{"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0,
               "content_index": 0, "delta": d, "sequence_number": n}
              for n, d in enumerate(["Hel", "lo", " there"])]  # fmt: skip
    events.insert(0, {"type": "response.content_part.added", "content_index": 0})
    c.append(reply, neutral_deltas(events), actor="a")
    assert c.stored_message(reply)["native"]["content"][0]["text"] == "Hello there"
    final = {**item, "status": "completed",
             "content": [{"type": "output_text", "text": "Hello there", "annotations": []}]}  # fmt: skip
    c.finish(reply, final, actor="a")
    assert c.stored_message(reply)["native"] == final

    call = c.begin({"type": "function_call", "call_id": "fc_1", "name": "f", "arguments": ""},
                   actor="a")  # fmt: skip
    c.append(call, neutral_deltas([{"type": "response.function_call_arguments.delta",
                                    "delta": '{"x":'}]), actor="a")  # fmt: skip
    assert c.stored_message(call)["native"]["arguments"] == '{"x":'
    assert replayed(c).entries == c.entries


# ---- the repair policy --------------------------------------------------------------------


def test_a_half_written_call_is_never_sent_and_the_text_is():
    c = new_context()
    reply = c.begin({"role": "assistant", "content": ""}, actor="a")
    c.append(reply, neutral_deltas(chat_chunks("Sure, ", '{"ci')[:-1]), actor="a")
    v = visible_of(c)
    sent = v.to_openai()
    assert sent[-1] == {"role": "assistant", "content": "Sure,"}
    omitted = v.conversion("openai-chat").omitted
    assert omitted == [{"id": reply, "what": "tool call call_1", "why": "incomplete: not run"}]
    # Anthropic: no tool_use without its result, no trailing space at the end of the prompt.
    assert v.to_anthropic()["messages"][-1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "Sure,"}],
    }


def test_an_empty_reply_and_its_reasoning_are_left_out():
    c = new_context("openai-responses")
    reasoning = c.insert({"type": "reasoning", "id": "rs_1", "summary": []}, actor="a")[0]
    reply = c.begin({"type": "message", "role": "assistant", "content": []}, actor="a")
    messages, notes = repair(visible_of(c).messages)
    assert [m.id for m in messages] == [c.order[0]]
    assert {n["id"] for n in notes} == {reply, reasoning}

    a = new_context("anthropic")
    r = a.begin({"role": "assistant", "content": ""}, actor="a", format="anthropic")
    a.append(r, neutral_deltas(anthropic_events("", "half a thought", "{}")[:4]), actor="a")
    sent = visible_of(a).to_anthropic()["messages"]
    assert len(sent) == 1  # unsigned thinking alone: nothing sendable


def test_a_call_answered_later_is_kept():
    c = new_context()
    reply = c.begin({"role": "assistant", "content": ""}, actor="a")
    c.append(reply, neutral_deltas(chat_chunks("", '{"a": 1}')), actor="a")
    c.abandon(reply, reason="client went away", actor="a")
    c.insert({"role": "tool", "tool_call_id": "call_1", "content": "42"}, actor="a")
    sent = visible_of(c).to_openai()
    assert sent[1]["tool_calls"][0]["id"] == "call_1" and sent[2]["tool_call_id"] == "call_1"


def test_commands_on_a_reply_that_is_not_streaming_are_refused():
    c = new_context()
    reply = c.begin({"role": "assistant", "content": ""}, actor="a")
    c.append(reply, [{"text": "a"}], actor="a")
    with pytest.raises(InvalidOperationError, match="still streaming"):
        c.compress([0, 1], {"role": "user", "content": "summary"}, actor="a")
    c.abandon(reply, actor="a")
    for act in (lambda: c.append(reply, [{"text": "b"}], actor="a"),
                lambda: c.finish(reply, actor="a"), lambda: c.abandon(reply, actor="a")):  # fmt: skip
        with pytest.raises(InvalidOperationError, match="abandoned"):
            act()
    with pytest.raises(InvalidOperationError, match="finished"):
        c.finish(0, actor="a")
    with pytest.raises(InvalidOperationError, match="assistant"):
        c.begin({"role": "user", "content": ""}, actor="a")
    with pytest.raises(InvalidOperationError, match="delta 0"):
        neutral_deltas([{"text": 3}])
    with pytest.raises(InvalidOperationError, match="not a delta"):
        neutral_deltas([{"what": "ever"}])


def test_a_rollback_takes_a_reply_begun_in_its_batch():
    c = new_context()
    c.batch_start(actor="a")
    reply = c.begin({"role": "assistant", "content": ""}, actor="a")
    c.append(reply, [{"text": "abc"}], actor="a")
    c.batch_end(actor="a")
    assert reply not in c.order
    with pytest.raises(UnknownMessageError):
        c.append(reply, [{"text": "d"}], actor="a")


# ---- properties ---------------------------------------------------------------------------

pieces = st.lists(st.text(min_size=0, max_size=12), min_size=1, max_size=40)


@settings(max_examples=examples(60), deadline=None)
@given(text=pieces, cuts=st.lists(st.integers(1, 8), min_size=1, max_size=10), keep=st.booleans())
def test_however_deltas_are_grouped_the_reply_is_their_concatenation(text, cuts, keep):
    """Any grouping of the same deltas into appends gives the same message, replay agrees,
    and the prompt never holds a call or an empty reply of an incomplete message."""
    c = new_context()
    reply = c.begin({"role": "assistant", "content": ""}, actor="a")
    deltas = [{"text": t} for t in text]
    at, n = 0, 0
    while at < len(deltas):
        size = cuts[n % len(cuts)]
        c.append(reply, neutral_deltas(deltas[at : at + size]), actor="a")
        at, n = at + size, n + 1
    whole = "".join(text)
    assert c.stored_message(reply)["content"] == whole
    assert replayed(c).entries == c.entries
    if keep:
        c.abandon(reply, actor="a")
    sent = visible_of(c).to_openai()
    assert all("tool_calls" not in m for m in sent)
    assert (len(sent) == 2) == bool(whole.strip())
