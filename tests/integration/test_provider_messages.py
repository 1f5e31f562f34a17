"""What the OpenAI SDK returns for a chat completion is stored as it came (the pydantic
object, to_dict(), model_dump()), read back losslessly, and sent back as the API takes it;
non-text parts read in every projection."""

import pytest
from openai.types.chat import ChatCompletion, ChatCompletionMessage

from ctxstore import InvalidMessageError, InvalidOperationError

RESPONSE = {
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o",
    "choices": [{"index": 0, "finish_reason": "tool_calls", "logprobs": None, "message": {
        "role": "assistant", "content": "Looking it up.", "refusal": None,
        "annotations": [{"type": "url_citation", "url_citation": {
            "start_index": 0, "end_index": 7, "title": "Docs", "url": "https://example.com"}}],
        "audio": {"id": "audio_1", "data": "UklGRg==", "expires_at": 1700000000,
                  "transcript": "Looking it up."},
        "tool_calls": [{"id": "call_1", "type": "function",
                        "function": {"name": "search", "arguments": "{}"}}],
        "reasoning_content": "The user wants x.",
    }}],
}  # fmt: skip


def sdk_message() -> ChatCompletionMessage:
    return ChatCompletion.model_validate(RESPONSE).choices[0].message


@pytest.mark.parametrize("form", ["object", "to_dict", "model_dump"])
def test_the_sdks_message_is_stored_as_it_came(store, form):
    message = sdk_message()
    given = {"object": message, "to_dict": message.to_dict(), "model_dump": message.model_dump()}
    cid = store.create()
    store.insert(cid, {"role": "user", "content": "find x"})
    store.insert(cid, given[form])
    store.insert(cid, {"role": "tool", "tool_call_id": "call_1", "content": "x is 1"})
    stored = store.visible(cid).messages[1].model_dump(mode="json")
    original = RESPONSE["choices"][0]["message"]
    for key in ("content", "annotations", "audio", "tool_calls", "reasoning_content"):
        assert stored[key] == original[key], key
    sent = store.visible(cid).to_openai()[1]
    assert sent == {
        "role": "assistant", "content": "Looking it up.", "audio": {"id": "audio_1"},
        "tool_calls": original["tool_calls"],
    }  # fmt: skip


def test_the_legacy_function_call_and_provider_fields(store):
    cid = store.create()
    store.insert(cid, {"role": "user", "content": "q"})
    store.insert(cid, {"role": "assistant", "content": None,
                       "function_call": {"name": "f", "arguments": "{}"}, "x_vendor": {"a": 1}})  # fmt: skip
    got = store.visible(cid).messages[1]
    assert got.function_call is not None and got.function_call.name == "f"
    assert got.model_dump()["x_vendor"] == {"a": 1}
    assert store.visible(cid).to_openai()[1] == {
        "role": "assistant",
        "function_call": {"name": "f", "arguments": "{}"},
    }
    with pytest.raises(InvalidMessageError, match="function_call"):
        store.insert(cid, {"role": "user", "content": "q", "function_call": {"name": "f"}})


def test_what_is_not_a_message_is_named(store):
    cid = store.create()
    with pytest.raises(InvalidOperationError, match="object"):
        store.insert(cid, object())
    with pytest.raises(InvalidMessageError, match="int"):
        store.insert(cid, [3])


def test_non_text_parts_read_in_history_diff_and_replay(store):
    cid = store.create()
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    store.insert(cid, {"role": "user", "content": [{"type": "text", "text": "look"}, image]})
    store.insert(cid, {"role": "assistant", "content": "a cat"})
    history = store.history(cid, changes=True)
    assert history[1].changes.added[0].preview == "look [image_url]"
    assert store.diff(cid, 1, 3).added[0].preview == "look [image_url]"
    assert len(list(store.replay(cid))) == 3


def test_chat_messages_read_back_exactly_as_given(store):
    """Same shape in, same shape out: to_openai(exact=True) gives every chat message key
    for key as inserted (the SDK's extras and explicit nulls included); to_openai() gives
    what Chat Completions takes."""
    message = sdk_message()
    corpus = [
        {"role": "system", "content": "Be brief.", "name": "policy"},
        {"role": "user", "content": [
            {"type": "text", "text": "What is in it?"},
            {"type": "image_url", "image_url": {"url": "https://x/cat.png", "detail": "low"}}]},
        message.model_dump(),  # every field, nulls included
        {"role": "tool", "tool_call_id": "call_1", "content": "found"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c2", "type": "custom",
         "custom": {"name": "sql", "input": "SELECT 1"}}], "refusal": None},
        {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "1"}]},
        message.to_dict(),  # only what the API returned
    ]  # fmt: skip
    corpus[-1] = {**corpus[-1], "tool_calls": None}  # (its call is answered above)
    cid = store.create()
    store.insert(cid, corpus)
    assert store.visible(cid).to_openai(exact=True) == corpus
    sent = store.visible(cid).to_openai()
    assert "annotations" not in sent[2] and "reasoning_content" not in sent[2]
