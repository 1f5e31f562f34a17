"""What real provider traffic sends (issue: SDK objects at any depth, fields servers add):
accepted on every backend, stored exactly, read back and sent back."""

from __future__ import annotations

import re

import pytest

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")

from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.domain.errors import CtxStoreError

SIGNATURE = "CiQB0e2Kb-thought-signature=="
COMPLETION = {
    "id": "chatcmpl-g", "object": "chat.completion", "created": 1, "model": "gemini-2.5-flash",
    "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": None,
        "tool_calls": [{
            "id": "call_w", "type": "function",
            "function": {"name": "weather", "arguments": '{"city": "Paris"}'},
            "extra_content": {"google": {"thought_signature": SIGNATURE}},
        }],
    }}],
    "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25},
}  # fmt: skip


@pytest.fixture
def store(store_url):
    with ContextStore.from_url(store_url, Settings(actor="t")) as s:
        yield s


def test_anthropic_sdk_blocks_inside_a_plain_message_are_accepted(store):
    """Anthropic's documented tool loop: {"role": "assistant", "content": message.content}."""
    from anthropic.types import TextBlock, ToolUseBlock

    content = [
        TextBlock(type="text", text="Let me check."),
        ToolUseBlock(type="tool_use", id="toolu_1", name="weather", input={"city": "巴黎"}),
    ]
    cid = store.create()
    store.insert(cid, [{"role": "user", "content": "Weather in Paris?"}], format="anthropic")
    store.insert(cid, {"role": "assistant", "content": content}, format="anthropic")
    store.insert(cid, {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "14°C"}]})  # fmt: skip
    sent = store.visible(cid).to_anthropic()["messages"]
    assert sent[1] == {"role": "assistant", "content": [
        {"type": "text", "text": "Let me check."},
        {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "巴黎"}},
    ]}  # fmt: skip


def test_openai_sdk_tool_calls_inside_a_plain_message_are_accepted(store):
    """The chat cookbook: {"role": "assistant", "content": None, "tool_calls": msg.tool_calls}."""
    from openai.types.chat import ChatCompletion

    msg = ChatCompletion.model_validate(COMPLETION).choices[0].message
    cid = store.create()
    store.insert(cid, [{"role": "user", "content": "Weather in Paris?"}])
    store.insert(cid, {"role": "assistant", "content": None, "tool_calls": msg.tool_calls})
    store.insert(cid, {"role": "tool", "tool_call_id": "call_w", "content": "14°C"})
    call = store.visible(cid).to_openai()[1]["tool_calls"][0]
    assert call["function"] == {"name": "weather", "arguments": '{"city": "Paris"}'}
    assert call["extra_content"] == {"google": {"thought_signature": SIGNATURE}}


def test_fields_a_server_adds_to_tool_calls_are_kept_and_sent_back(store):
    """Gemini's OpenAI-compatible endpoint needs extra_content.google.thought_signature
    sent back on the next turn; unknown fields at the call and function level are kept."""
    cid = store.create()
    store.insert(cid, [{"role": "user", "content": "Weather in Paris?"}])
    store.record_response(cid, COMPLETION)
    assistant = {
        "role": "assistant", "content": None,
        "tool_calls": [{"id": "c2", "type": "function", "x_call": {"n": 1},
                        "function": {"name": "f", "arguments": "{}", "x_fn": [1, "二"]}}],
    }  # fmt: skip
    store.insert(cid, [{"role": "tool", "tool_call_id": "call_w", "content": "14°C"}, assistant])
    store.insert(cid, {"role": "tool", "tool_call_id": "c2", "content": "ok"})
    sent = store.visible(cid).to_openai()
    assert sent[1]["tool_calls"][0]["extra_content"] == {"google": {"thought_signature": SIGNATURE}}
    assert sent[3]["tool_calls"] == assistant["tool_calls"]
    if not store.url.startswith("memory"):
        with ContextStore.from_url(store.url) as again:  # read back from storage, not a cache
            assert again.visible(cid).to_openai()[3]["tool_calls"] == assistant["tool_calls"]


def test_a_field_a_server_adds_must_be_plain_json(store):
    from ctxstore.domain.errors import InvalidMessageError

    cid = store.create()
    bad = {"role": "assistant", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"},
         "x": float("nan")}]}  # fmt: skip
    with pytest.raises(InvalidMessageError):
        store.insert(cid, bad)
    assert store.visible(cid).version == 1


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ({"kind": "wibble", "body": "x"}, "no 'role' (openai-chat, anthropic), no 'parts'"),
        ({"kind": "wibble", "body": "x"}, "keys seen: 'kind', 'body'"),
        ({"role": "model", "parts": [{"wibble": "hi"}]}, "Gemini part 0 holds none of text"),
        ({"role": "robot", "parts": [{"text": "hi"}]}, "not a Gemini Content: role 'robot'"),
        ({"role": "robot", "content": "x"}, "invalid openai-chat message: role:"),
        ({"type": "wibble"}, "type 'wibble'"),
    ],
)
def test_a_refusal_names_the_shape_it_saw_and_what_is_wrong(store, given, says):
    from ctxstore.domain.errors import InvalidMessageError

    cid = store.create()
    with pytest.raises(InvalidMessageError, match=re.escape(says)):
        store.insert(cid, given)
    assert store.visible(cid).version == 1


def test_an_anthropic_message_reads_back_exactly_and_its_extra_fields_are_reported(store):
    """to_anthropic() sends what the Messages API takes (role, content) and names the rest;
    to_anthropic(exact=True) gives each stored Anthropic message key for key."""
    response = {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "晴れ、14度です。"}], "stop_reason": "end_turn",
        "stop_sequence": None, "usage": {"input_tokens": 12, "output_tokens": 9},
    }  # fmt: skip
    asked = {"role": "user", "content": "天気は?", "x_trace": {"span": "a1"}}
    cid = store.create()
    store.insert(cid, [asked], format="anthropic")
    store.insert(cid, response)
    seen = store.visible(cid)
    assert seen.to_anthropic()["messages"] == [
        {"role": "user", "content": "天気は?"},
        {"role": "assistant", "content": response["content"]},
    ]
    omitted = seen.conversion("anthropic").omitted
    assert [o["what"] for o in omitted] == [
        "message fields ['x_trace']",
        "message fields ['id', 'type', 'model', 'stop_reason', 'stop_sequence', 'usage']",
    ]
    assert seen.to_anthropic(exact=True)["messages"] == [asked, response]


LEGACY = [
    {"role": "user", "content": "What time is it in Tokyo?"},
    {"role": "assistant", "content": None,
     "function_call": {"name": "get_time", "arguments": '{"tz": "Asia/Tokyo"}'}},
    {"role": "function", "name": "get_time", "content": "15:04"},
    {"role": "assistant", "content": "東京は15時04分です。"},
]  # fmt: skip


@pytest.mark.parametrize("kind", ["store", "http"])
def test_legacy_function_messages_are_kept_paired_and_converted(store, kind):
    """`function_call` answered by a `function` message (ChatCompletionFunctionMessageParam):
    accepted, sent back as they came, paired like a tool call, converted with one id."""
    from ..conftest import surface_over

    with surface_over(kind, store) as face:
        cid = face.create()
        face.insert(cid, LEGACY)
        seen = face.visible(cid)
        assert seen.to_openai() == LEGACY[:1] + [
            {"role": "assistant", "function_call": LEGACY[1]["function_call"]},
            *LEGACY[2:],
        ]
        items = seen.to_responses()
        call, output = items[1], items[2]
        assert (call["type"], call["name"], call["arguments"]) == (
            "function_call",
            "get_time",
            '{"tz": "Asia/Tokyo"}',
        )
        assert (output["type"], output["call_id"], output["output"]) == (
            "function_call_output",
            call["call_id"],
            "15:04",
        )
        turns = seen.to_anthropic()["messages"]
        use, result = turns[1]["content"][0], turns[2]["content"][0]
        assert (use["type"], use["input"]) == ("tool_use", {"tz": "Asia/Tokyo"})
        assert (result["tool_use_id"], result["content"]) == (use["id"], "15:04")
        ids = [m.id for m in seen.messages]
        # The call and its result go together: neither is taken alone.
        for alone in (ids[1], ids[2]):
            with pytest.raises(CtxStoreError, match="together|separate|follow"):
                face.delete(cid, [alone])
        face.delete(cid, ids[1:3])
        with pytest.raises(CtxStoreError, match="follow"):
            face.insert(cid, {"role": "function", "name": "get_time", "content": "15:05"})
        with pytest.raises(CtxStoreError, match="name"):
            face.insert(cid, {"role": "function", "content": "15:05"})


def test_a_legacy_function_call_is_counted(store):
    cid = store.create()
    store.insert(cid, LEGACY[:1])
    before = store.visible(cid).tokens
    store.insert(cid, LEGACY[1:3])
    grown = store.visible(cid).tokens - before
    # framing of two messages and the call, the name twice, the arguments, the result
    assert grown >= 3 * 3 + 10, grown


PDF_URL = "data:application/pdf;base64,JVBERi0xLjQKJcfs"


def test_conversions_carry_inputs_errors_images_and_files_or_name_them(store):
    """The losses found in real traffic: each value crosses, or is named with a reason."""
    cid = store.create()
    store.insert(cid, [
        {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "Run it"},
            {"type": "input_file", "file_data": PDF_URL, "filename": "spec.pdf"}]},
        {"type": "custom_tool_call", "call_id": "c1", "name": "python", "input": "print(1+1)"},
        {"type": "custom_tool_call_output", "call_id": "c1", "output": "2"},
    ])  # fmt: skip
    claude = store.visible(cid).conversion("anthropic")
    user, use = claude.payload["messages"][0], claude.payload["messages"][1]["content"][0]
    assert user["content"][1] == {"type": "document", "title": "spec.pdf", "source": {
        "type": "base64", "media_type": "application/pdf", "data": "JVBERi0xLjQKJcfs"}}  # fmt: skip
    assert use["input"] == {"input": "print(1+1)"}
    assert claude.omitted == []

    other = store.create()
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAAB"}}  # fmt: skip
    store.insert(other, [
        {"role": "user", "content": "Plot it"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "plot", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "is_error": True,
                                      "content": [{"type": "text", "text": "boom"}, image]}]},
    ], format="anthropic")  # fmt: skip
    seen = store.visible(other)
    result_id = seen.messages[2].id
    items = seen.conversion("openai-responses")
    output = items.payload[-1]["output"]
    assert output[0] == {"type": "input_text", "text": "boom"}
    assert output[1]["type"] == "input_image" and output[1]["image_url"].startswith(
        "data:image/png"
    )
    assert [(o["id"], o["what"]) for o in items.omitted] == [(result_id, "content[0].is_error")]
    chat = seen.conversion("openai-chat")
    assert chat.payload[-1] == {"role": "tool", "tool_call_id": "t1", "content": "boom"}
    [lost] = chat.omitted
    assert lost["id"] == result_id and "is_error" in lost["what"] and "source.data" in lost["what"]

    files = store.create()
    store.insert(files, {"role": "user", "content": [
        {"type": "text", "text": "Summarise"},
        {"type": "file", "file": {"file_data": PDF_URL, "filename": "a.pdf"}},
        {"type": "file", "file": {"file_id": "file-abc"}}]})  # fmt: skip
    seen = store.visible(files)
    parts = seen.to_responses()[0]["content"]
    assert parts[1] == {"type": "input_file", "file_data": PDF_URL, "filename": "a.pdf"}
    assert parts[2] == {"type": "input_file", "file_id": "file-abc"}
    to_claude = seen.conversion("anthropic")
    assert to_claude.payload["messages"][0]["content"][1]["type"] == "document"
    assert [o["what"] for o in to_claude.omitted] == ["content[2].file.file_id"]
