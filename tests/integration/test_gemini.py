"""Gemini as a native shape on every surface: responses and streamed chunks recorded as the
SDK gives them, its pairing rules kept, its tokens labelled estimated, and its messages
read back by the other shapes' readers."""

from __future__ import annotations

import pytest

from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.domain.errors import CtxStoreError

from ..conftest import surface_over

types = pytest.importorskip("google.genai.types")


@pytest.fixture
def store(store_url):
    with ContextStore.from_url(store_url, Settings(actor="t")) as s:
        yield s


def part(**kwargs):
    return types.Part(**kwargs)


def chunk(*parts, usage=None):
    return types.GenerateContentResponse(
        candidates=[types.Candidate(content=types.Content(role="model", parts=list(parts)))],
        usage_metadata=usage,
    )


QUESTION = {"role": "user", "parts": [{"text": "Wetter in Paris und Rom?"}]}


@pytest.mark.parametrize("kind", ["store", "http"])
def test_a_streamed_reply_and_a_recorded_response(store, kind):
    with surface_over(kind, store) as face:
        cid = face.create()
        face.insert(cid, QUESTION)
        with face.stream(cid, format="gemini") as reply:
            reply.add(chunk(part(text="Ich prüfe ", thought=True)))
            reply.add(chunk(part(text="das Wetter.", thought=True)))
            reply.add(chunk(part(function_call=types.FunctionCall(name="weather", args={"city": "Paris"}),
                                 thought_signature=b"\x00sig\xff")))  # fmt: skip
            reply.add(
                chunk(part(function_call=types.FunctionCall(name="weather", args={"city": "Rom"})))
            )
        streamed = face.visible(cid).messages[-1]
        assert streamed.format == "gemini" and streamed.role == "assistant"
        assert types.Content.model_validate(streamed.native).parts == [
            part(text="Ich prüfe das Wetter.", thought=True),
            part(function_call=types.FunctionCall(name="weather", args={"city": "Paris"}),
                 thought_signature=b"\x00sig\xff"),
            part(function_call=types.FunctionCall(name="weather", args={"city": "Rom"})),
        ]  # fmt: skip
        # The next user turn answers both calls at once, or is refused.
        with pytest.raises(CtxStoreError, match="every call"):
            face.insert(cid, {"role": "user", "parts": [
                {"function_response": {"name": "weather", "response": {"t": 21}}}]})  # fmt: skip
        face.insert(cid, {"role": "user", "parts": [
            {"function_response": {"name": "weather", "response": {"t": 21}}},
            {"function_response": {"name": "weather", "response": {"t": 25}}}]})  # fmt: skip
        response = types.GenerateContentResponse(
            candidates=[types.Candidate(content=types.Content(role="model", parts=[
                part(text="Paris 21 °C, Rom 25 °C.")]), finish_reason="STOP")],
            usage_metadata=types.GenerateContentResponseUsageMetadata(
                prompt_token_count=61, candidates_token_count=9, thoughts_token_count=4),
            model_version="gemini-2.5-flash",
        )  # fmt: skip
        written = face.record_response(cid, response)
        seen = face.visible(cid)
        assert seen.messages[-1].id == written.ids[0]
        assert seen.messages[-1].native == {
            "role": "model",
            "parts": [{"text": "Paris 21 °C, Rom 25 °C."}],
        }
        assert seen.estimated  # Google publishes no tokenizer: the counts are estimates
        [usage] = face.usage_report(context_id=cid)
        assert (usage.model, usage.prompt_tokens, usage.completion_tokens) == (
            "gemini-2.5-flash",
            61,
            13,
        )
        # Read by the other shapes' readers: the calls and their results paired by one id.
        chat = seen.to_openai()
        calls = chat[1]["tool_calls"]
        assert [c["function"]["name"] for c in calls] == ["weather", "weather"]
        assert [m["tool_call_id"] for m in chat[2:4]] == [c["id"] for c in calls]
        claude = seen.to_anthropic()["messages"]
        uses = [b["id"] for b in claude[1]["content"] if b["type"] == "tool_use"]
        assert [b["tool_use_id"] for b in claude[2]["content"]] == uses


def test_a_call_and_its_response_are_taken_together(store):
    cid = store.create()
    store.insert(cid, [QUESTION,
                       {"role": "model", "parts": [{"function_call": {"name": "weather", "args": {}}}]},
                       {"role": "user", "parts": [{"function_response": {"name": "weather", "response": {}}}]},
                       {"role": "model", "parts": [{"text": "Sonnig."}]}])  # fmt: skip
    ids = [m.id for m in store.visible(cid).messages]
    for alone in ids[1:3]:
        with pytest.raises(CtxStoreError, match="together"):
            store.delete(cid, [alone])
    store.compress(cid, ids[:3], "Asked for the weather; the tool answered.")
    assert [m.role for m in store.visible(cid).messages] == ["system", "assistant"]
    with pytest.raises(CtxStoreError):  # a response with no call before it
        store.insert(
            cid, {"role": "user", "parts": [{"function_response": {"name": "x", "response": {}}}]}
        )


def test_an_unfinished_gemini_reply_is_sent_repaired(store):
    cid = store.create()
    store.insert(cid, QUESTION)
    reply = store.stream(cid, format="gemini")
    reply.add(chunk(part(text="Paris: 21 °C. Rom: ")))
    reply.add(chunk(part(function_call=types.FunctionCall(name="weather", args={"city": "Rom"}))))
    reply.abandon(reason="client went away")
    done = store.visible(cid).conversion("gemini")
    assert done.payload["contents"][-1] == {
        "role": "model",
        "parts": [{"text": "Paris: 21 °C. Rom:"}],
    }
    assert [o["what"] for o in done.omitted] == ["function_call weather#0"]
