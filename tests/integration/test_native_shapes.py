"""Responses items and Anthropic messages stored exactly as the SDKs make them, read back in
the same shape key for key, held to their own pairing rules, and converted across shapes
with what cannot cross reported."""

import copy

import pytest
from anthropic.types import Message as AnthropicMessage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseReasoningItem,
)

from ctxstore import InvalidMessageError, MalformedTranscriptError, PromptDoesNotFitError

REASONING = ResponseReasoningItem.model_validate({
    "id": "rs_1", "type": "reasoning", "encrypted_content": "gAAAAB...",
    "summary": [{"type": "summary_text", "text": "The user wants the weather."}],
})  # fmt: skip
CALL = ResponseFunctionToolCall.model_validate({
    "id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "get_weather",
    "arguments": '{"city": "Paris"}', "status": "completed",
})  # fmt: skip
ANSWER = ResponseOutputMessage.model_validate({
    "id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
    "content": [{"type": "output_text", "text": "Sunny, 21°C.", "annotations": []}],
})  # fmt: skip
RESPONSES_TURN = [
    {"role": "user", "content": "Weather in Paris?", "type": "message"},
    REASONING.model_dump(exclude_unset=True),
    CALL.model_dump(exclude_unset=True),
    {"type": "function_call_output", "call_id": "call_1", "output": '{"temp": 21}'},
    ANSWER.model_dump(exclude_unset=True),
    {"type": "web_search_call", "id": "ws_1", "status": "completed",
     "action": {"type": "search", "query": "paris weather"}},
]  # fmt: skip

CLAUDE_REPLY = AnthropicMessage.model_validate({
    "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
    "content": [
        {"type": "thinking", "thinking": "Need the weather tool.", "signature": "EqQBCkYIBxgC"},
        {"type": "text", "text": "Checking.", "citations": None},
        {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Paris"}},
    ],
    "stop_reason": "tool_use", "stop_sequence": None,
    "usage": {"input_tokens": 10, "output_tokens": 20},
})  # fmt: skip
ANTHROPIC_TURN = [
    {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?",
                                  "cache_control": {"type": "ephemeral"}}]},
    {"role": "assistant", "content": CLAUDE_REPLY.model_dump(exclude_unset=True)["content"]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01",
                                  "content": [{"type": "text", "text": "21°C"}],
                                  "is_error": False}]},
    {"role": "assistant", "content": [{"type": "redacted_thinking", "data": "EmwKAhgB"},
                                      {"type": "text", "text": "Sunny, 21°C."}]},
]  # fmt: skip


def test_responses_items_read_back_exactly(store):
    cid = store.create(model="gpt-5")
    store.insert(cid, [REASONING, CALL][:0] + RESPONSES_TURN[:1])  # a plain user item
    store.insert(cid, [REASONING, CALL])  # the SDK's own objects
    store.insert(cid, RESPONSES_TURN[3:])
    visible = store.visible(cid)
    assert [m.native for m in visible.messages] == RESPONSES_TURN
    assert [m.role for m in visible.messages] == ["user", "assistant", "assistant", "tool",
                                                  "assistant", "assistant"]  # fmt: skip
    assert store.visible(cid).to_responses() == RESPONSES_TURN
    assert not visible.estimated  # o200k_base, exact
    without_state = store.visible(cid).conversion("openai-responses", store=False)
    assert all("id" not in item for item in without_state.payload)


def test_anthropic_messages_read_back_exactly(store):
    cid = store.create(model="claude-sonnet-4-5")
    store.insert(cid, [{"role": "system", "content": "Be brief."}], format="anthropic")
    store.insert(cid, ANTHROPIC_TURN)
    visible = store.visible(cid)
    assert [m.native for m in visible.messages][1:] == ANTHROPIC_TURN
    assert visible.to_anthropic() == {"system": "Be brief.", "messages": ANTHROPIC_TURN}
    assert visible.estimated  # no public tokenizer: labelled
    reply = copy.deepcopy(CLAUDE_REPLY.model_dump(exclude_unset=True))
    other = store.create()
    store.insert(other, [{"role": "user", "content": "hi"}])
    store.insert(other, CLAUDE_REPLY)  # a response object as it is
    stored = store.visible(other).messages[-1]
    assert stored.native == reply and stored.call_ids == ["toolu_01"]


def test_each_shape_keeps_its_own_pairing(store):
    cid = store.create()
    store.insert(cid, RESPONSES_TURN[:3])  # the call waits for its output: fine at the tail
    with pytest.raises(MalformedTranscriptError, match="separate"):
        store.insert(cid, {"role": "user", "content": "never mind", "type": "message"})
    with pytest.raises(MalformedTranscriptError):
        store.delete(cid, [store.visible(cid).ids[2]])  # the call without its reasoning
    with pytest.raises(MalformedTranscriptError):
        store.delete(cid, [store.visible(cid).ids[1]])  # the reasoning without its call
    store.insert(cid, RESPONSES_TURN[3])
    store.delete(cid, store.visible(cid).ids[1:4])  # reasoning, call and output together
    claude = store.create()
    store.insert(claude, ANTHROPIC_TURN[:2])
    with pytest.raises(MalformedTranscriptError, match="separate"):
        store.insert(claude, {"role": "assistant", "content": [{"type": "text", "text": "x"}]})
    two_calls = {"role": "assistant", "content": [
        {"type": "tool_use", "id": "t1", "name": "a", "input": {}},
        {"type": "tool_use", "id": "t2", "name": "b", "input": {}}]}  # fmt: skip
    other = store.create()
    store.insert(other, [ANTHROPIC_TURN[0], two_calls])
    only_one = {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}  # fmt: skip
    with pytest.raises(MalformedTranscriptError, match="every call"):
        store.insert(other, only_one)


def test_unknown_shapes_and_bad_payloads_are_named(store):
    cid = store.create()
    with pytest.raises(InvalidMessageError, match="banana"):
        store.insert(cid, {"type": "banana"})
    with pytest.raises(InvalidMessageError, match="call_id"):
        store.insert(cid, {"type": "function_call", "name": "f", "arguments": "{}"})
    with pytest.raises(InvalidMessageError, match="content block 0"):
        store.insert(cid, {"role": "user", "content": [{"type": "hologram"}]}, format="anthropic")
    assert store.visible(cid).version == 1


def test_conversions_across_shapes_report_what_cannot_cross(store):
    cid = store.create()
    store.insert(cid, RESPONSES_TURN)
    chat = store.visible(cid).conversion("openai-chat")
    assert chat.payload == [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function", "function": {
            "name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 21}'},
        {"role": "assistant", "content": "Sunny, 21°C."},
    ]  # fmt: skip
    assert {o["what"] for o in chat.omitted} == {"reasoning", "web_search_call", "id, status"}
    ids = store.visible(cid).messages
    # The items' own ids and statuses (the Responses API's bookkeeping) are named too.
    assert [o["id"] for o in chat.omitted if o["what"] == "id, status"] == [ids[2].id, ids[4].id]
    claude = store.visible(cid).conversion("anthropic")
    turns = claude.payload["messages"]
    assert [t["role"] for t in turns] == ["user", "assistant", "user", "assistant"]
    assert turns[1]["content"][0] == {"type": "tool_use", "id": "call_1", "name": "get_weather",
                                      "input": {"city": "Paris"}}  # fmt: skip
    other = store.create()
    store.insert(other, ANTHROPIC_TURN)
    responses = store.visible(other).conversion("openai-responses")
    kinds = [item.get("type", "message") for item in responses.payload]
    assert kinds == ["message", "message", "function_call", "function_call_output", "message"]
    assert {o["what"] for o in responses.omitted} == {"thinking", "redacted_thinking"}


def test_prompts_keep_reasoning_with_its_turn(store):
    cid = store.create()
    store.insert(cid, RESPONSES_TURN[:5])
    outcomes = set()
    for budget in range(40, 400, 20):
        try:
            prompt = store.build_prompt(cid, budget)
        except PromptDoesNotFitError:  # too small for the must-keep messages
            prompt = None
        if prompt is None:
            continue
        kept = [m.native for m in prompt.messages]
        reasoning, call = RESPONSES_TURN[1], RESPONSES_TURN[2]
        assert (reasoning in kept) == (call in kept), budget
        outcomes.add(call in kept)
    assert outcomes == {True, False}  # budgets that keep the turn, and that leave it out


def test_record_response_for_each_sdk(store):
    from openai.types.chat import ChatCompletion
    from openai.types.responses import Response

    chat = ChatCompletion.model_validate({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o",
        "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                     "message": {"role": "assistant", "content": "Hello!", "refusal": None}}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
    })  # fmt: skip
    cid = store.create(model="gpt-4o")
    store.insert(cid, {"role": "user", "content": "hi"})
    w = store.record_response(cid, chat, request={"messages": [{"role": "user", "content": "hi"}]})
    assert w.version == 4  # the message and the usage, written together
    assert [h.type for h in store.history(cid)[-2:]] == ["insert", "usage"]
    assert store.visible(cid).messages[-1].content == "Hello!"
    call = store.calls(cid)[-1]
    assert (call.model, call.prompt_tokens, call.completion_tokens) == ("gpt-4o", 12, 3)
    assert call.for_version == 2

    response = Response.model_validate({
        "id": "resp_1", "object": "response", "created_at": 1, "model": "gpt-5",
        "output": [REASONING.model_dump(), CALL.model_dump()], "parallel_tool_calls": True,
        "tool_choice": "auto", "tools": [], "status": "completed",
        "usage": {"input_tokens": 20, "output_tokens": 9, "total_tokens": 29,
                  "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                  "output_tokens_details": {"reasoning_tokens": 4}},
    })  # fmt: skip
    other = store.create(model="gpt-5")
    store.insert(other, RESPONSES_TURN[0])
    store.record_response(other, response)
    kinds = [m.native["type"] for m in store.visible(other).messages[1:]]
    assert kinds == ["reasoning", "function_call"]
    assert store.calls(other)[-1].prompt_tokens == 20

    claude = store.create(model="claude-sonnet-4-5")
    store.insert(claude, ANTHROPIC_TURN[0])
    store.record_response(claude, CLAUDE_REPLY)
    last = store.visible(claude).messages[-1]
    assert last.native == {"role": "assistant",
                           "content": CLAUDE_REPLY.model_dump(exclude_unset=True)["content"]}  # fmt: skip
    assert store.calls(claude)[-1].completion_tokens == 20
    with pytest.raises(InvalidMessageError, match="not a ChatCompletion"):
        store.record_response(claude, {"nothing": 1})


def test_native_contexts_export_import_verify_and_snapshot(tmp_path):
    from ctxstore.adapters.settings import Settings
    from ctxstore.adapters.store.facade import ContextStore

    url = f"sqlite:///{tmp_path / 'n.db'}"
    with ContextStore.from_url(url, Settings(snapshot_interval=2)) as store:
        cid = store.create()
        for item in RESPONSES_TURN:
            store.insert(cid, item)
        claude = store.create()
        for message in ANTHROPIC_TURN:
            store.insert(claude, message)
        lines = list(store.export_events(cid))
        copy_id = store.import_events(lines, new_id=True)
        assert [m.native for m in store.visible(copy_id).messages] == RESPONSES_TURN
        assert store.verify().ok
    with ContextStore.from_url(url) as cold:  # read back through the snapshots
        assert [m.native for m in cold.visible(cid).messages] == RESPONSES_TURN
        assert [m.native for m in cold.visible(claude).messages] == ANTHROPIC_TURN
        assert list(cold.export_events(cid)) == lines


CI_LOG = " ".join(f"job {j}: 212 tests passed, cache hit, 41s" for j in range(6))
VERDICT = "Every job passed on the first try, so the release can go out tonight."


@pytest.mark.parametrize("shape", ["openai-responses", "anthropic"])
def test_compaction_and_expansion_over_native_turns(store, shape):
    cid = store.create()
    for n in range(8):
        if shape == "openai-responses":
            store.insert(cid, [
                {"type": "message", "role": "user", "content": f"step {n}: check the build"},
                {"type": "reasoning", "id": f"rs_{n}", "summary": [
                    {"type": "summary_text", "text": f"run ci {n}"}]},
                {"type": "function_call", "call_id": f"c{n}", "name": "ci", "arguments": "{}"},
                {"type": "function_call_output", "call_id": f"c{n}", "output": f"green {n}. " + CI_LOG},
                {"type": "message", "role": "assistant", "content": f"build {n} is green. " + VERDICT},
            ])  # fmt: skip
        else:
            store.insert(cid, [
                {"role": "user", "content": f"step {n}: check the build"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": f"run ci {n}", "signature": "s"},
                    {"type": "tool_use", "id": f"t{n}", "name": "ci", "input": {}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": f"t{n}", "content": f"green {n}. " + CI_LOG}]},
                {"role": "assistant", "content": [{"type": "text", "text": f"build {n} is green. " + VERDICT}]},
            ])  # fmt: skip
    before = store.visible(cid)
    done = store.compact(cid)
    assert done.summary_id is not None
    after = store.visible(cid)
    assert len(after.messages) < len(before.messages)
    payload = after.to_responses() if shape == "openai-responses" else after.to_anthropic()
    assert payload  # the summary converts with the native turns around it
    store.expand(cid, done.summary_id)
    assert [m.native for m in store.visible(cid).messages] == [m.native for m in before.messages]


def test_records_are_kept_but_never_sent(store):
    cid = store.create()
    store.insert(cid, [
        {"role": "user", "content": "hi"},
        {"role": "developer", "content": "", "metadata": {"ctxstore": "record", "title": "t"}},
        {"role": "assistant", "content": "hello"},
    ])  # fmt: skip
    visible = store.visible(cid)
    assert len(visible.messages) == 3 and visible.token_counts[visible.ids[1]] == 0
    assert [m["content"] for m in visible.to_openai()] == ["hi", "hello"]
    assert visible.to_anthropic()["system"] is None
    assert [m.content for m in store.build_prompt(cid, 1000).messages] == ["hi", "hello"]
