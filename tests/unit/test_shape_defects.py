"""Two shape defects, through the public API: an Anthropic reply given as the SDK's block
objects inside a dict, and legacy chat function messages in a prompt."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from anthropic.types import TextBlock, ToolUseBlock

import ctxstore
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.domain.errors import PromptDoesNotFitError


@pytest.fixture
def store() -> Iterator[ContextStore]:
    with ctxstore.open("memory://") as opened:
        yield opened


def test_an_anthropic_reply_of_sdk_blocks_in_a_dict_is_anthropic(store: ContextStore) -> None:
    # The Anthropic tool-use loop appends {"role": "assistant", "content": message.content}:
    # the SDK's block objects, read as the dicts they are made from.
    cid = store.create()
    store.insert(cid, {"role": "user", "content": "Weather in Paris?"})
    blocks = [
        TextBlock(type="text", text="Let me look."),
        ToolUseBlock(type="tool_use", id="toolu_1", name="weather", input={"city": "Paris"}),
    ]
    store.insert(cid, {"role": "assistant", "content": blocks})
    answer = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}
    store.insert(cid, {"role": "user", "content": [answer]})
    stored = store.visible(cid).messages
    assert [m.format for m in stored] == [None, "anthropic", "anthropic"]
    assert stored[1].call_ids == ["toolu_1"]
    assert stored[1].native == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Paris"}},
        ],
    }


def test_a_prompt_keeps_a_legacy_function_call_with_its_result(store: ContextStore) -> None:
    cid = store.create()
    call = {"name": "weather", "arguments": '{"city": "Paris", "unit": "celsius"}'}
    store.insert(cid, {"role": "user", "content": "Weather in Paris?"})
    store.insert(cid, {"role": "assistant", "content": None, "function_call": call})
    store.insert(cid, {"role": "function", "name": "weather", "content": "sunny, 21 degrees"})
    store.insert(cid, {"role": "assistant", "content": "Sunny and 21 degrees."})
    store.insert(cid, {"role": "user", "content": "And Rome?"})
    whole = store.build_prompt(cid, 10_000, safety=1.0)
    assert [m.role for m in whole.messages] == [
        "user",
        "assistant",
        "function",
        "assistant",
        "user",
    ]
    # Under any budget the call and its result are sent together or not at all.
    for budget in range(1, whole.tokens + 1):
        try:
            prompt = store.build_prompt(cid, budget, safety=1.0)
        except PromptDoesNotFitError:
            continue
        calls = [m for m in prompt.messages if m.function_call is not None]
        results = [m for m in prompt.messages if m.role == "function"]
        assert len(calls) == len(results), (budget, [m.role for m in prompt.messages])
