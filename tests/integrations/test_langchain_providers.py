"""The LangChain chat history keeps what ChatOpenAI (Chat Completions and Responses, v1
content blocks) and ChatAnthropic produce — reasoning, thinking with its signature,
citations, tool calls, response and usage metadata — and gives the same messages back.
The messages are built offline from recorded responses by the integrations' own parsers."""

from __future__ import annotations

import pytest
from anthropic.types import Message as AnthropicMessage
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_openai import ChatOpenAI
from langchain_openai.chat_models.base import _construct_lc_result_from_responses_api
from openai.types.responses import Response

from ctxstore.adapters.integrations.langchain_history import CtxStoreChatMessageHistory
from ctxstore.adapters.store.facade import ContextStore

COMPLETION = {
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o",
    "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": "Checking.", "annotations": [],
        "tool_calls": [{"id": "call_1", "type": "function", "function": {
            "name": "get_weather", "arguments": '{"city": "Paris"}'}}]}}],
    "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
}  # fmt: skip
CLAUDE = {
    "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
    "content": [
        {"type": "thinking", "thinking": "Need the tool.", "signature": "EqQBCkYI"},
        {"type": "text", "text": "Checking.", "citations": [{
            "type": "char_location", "cited_text": "Paris", "document_index": 0,
            "document_title": "guide", "start_char_index": 0, "end_char_index": 5}]},
        {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Paris"}},
    ],
    "stop_reason": "tool_use", "stop_sequence": None,
    "usage": {"input_tokens": 10, "output_tokens": 20},
}  # fmt: skip
RESPONSE = {
    "id": "resp_1", "object": "response", "created_at": 1, "model": "gpt-5",
    "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "status": "completed",
    "output": [
        {"id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text", "text": "sun"}]},
        {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "Sunny, 21 °C.", "annotations": []}]},
    ],
    "usage": {"input_tokens": 20, "output_tokens": 9, "total_tokens": 29,
              "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
              "output_tokens_details": {"reasoning_tokens": 4}},
}  # fmt: skip


def provider_messages() -> list:
    openai = ChatOpenAI(model="gpt-4o", api_key="sk-offline")._create_chat_result(COMPLETION)
    claude = ChatAnthropic(model="claude-sonnet-4-5", api_key="sk-offline")._format_output(
        AnthropicMessage.model_validate(CLAUDE)
    )
    responses = _construct_lc_result_from_responses_api(
        Response.model_validate(RESPONSE), output_version="v1"
    )
    return [
        HumanMessage("Weather in Paris?"),
        openai.generations[0].message,
        ToolMessage("21 °C", tool_call_id="call_1"),
        claude.generations[0].message,
        ToolMessage("21 °C", tool_call_id="toolu_01"),
        responses.generations[0].message,
    ]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_provider_messages_round_trip(durable_url):
    messages = provider_messages()
    assert messages[3].content[0]["signature"] == "EqQBCkYI"  # thinking, as Claude sent it
    assert messages[5].content[0]["type"] == "reasoning"  # a v1 content block
    with ContextStore.from_url(durable_url) as store:
        history = CtxStoreChatMessageHistory("providers", store)
        history.add_messages(messages)
        again = CtxStoreChatMessageHistory("providers", store).messages
        assert again == messages
        assert [m.response_metadata for m in again] == [m.response_metadata for m in messages]
        assert again[1].usage_metadata == messages[1].usage_metadata
        visible = store.visible(history.context_id)
        assert [m.role for m in visible.messages] == [
            "user", "assistant", "tool", "assistant", "tool", "assistant"]  # fmt: skip
