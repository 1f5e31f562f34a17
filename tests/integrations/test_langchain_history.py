"""CtxStoreChatMessageHistory: LangChain messages round-trip exactly, on every backend."""

from __future__ import annotations

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import (
    AIMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory

from ctxstore import MalformedTranscriptError
from ctxstore.adapters.integrations.langchain_history import (
    CtxStoreChatMessageHistory,
    from_openai,
    to_openai,
)
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.domain.messages import Message

from ..conftest import surface_over

CONVERSATION = [
    SystemMessage("You are terse.", id="sys-1"),
    HumanMessage("Weather in Paris and 上海?", id="h-1", name="ana"),
    AIMessage(
        "",
        id="ai-1",
        tool_calls=[
            {"id": "call_1", "name": "weather", "args": {"city": "Paris"}, "type": "tool_call"},
            {
                "id": "call_2",
                "name": "weather",
                "args": {"city": "上海", "days": [1, 2]},
                "type": "tool_call",
            },
        ],
        additional_kwargs={"refusal": None},
        response_metadata={"model_name": "gpt-4o", "finish_reason": "tool_calls"},
        usage_metadata={"input_tokens": 12, "output_tokens": 7, "total_tokens": 19},
    ),
    ToolMessage("22°C", tool_call_id="call_1", id="t-1", artifact={"raw": [22.0]}),
    ToolMessage("18°C", tool_call_id="call_2", id="t-2", status="success"),
    AIMessage([{"type": "text", "text": "Paris 22°C, "}, {"type": "text", "text": "上海 18°C."}]),
    ChatMessage(content="noted", role="developer"),
]


@pytest.fixture(params=["store", "http"])
def store(request, store_url):
    """The store, or a tenant's HTTP client of a service over it."""
    with ContextStore.from_url(store_url) as s, surface_over(request.param, s) as given:
        yield given


def test_messages_round_trip_exactly(store):
    history = CtxStoreChatMessageHistory("thread-1", store)
    history.add_messages(CONVERSATION)
    assert history.messages == CONVERSATION
    # Another history object on the same session (another process) reads the same.
    assert CtxStoreChatMessageHistory("thread-1", store).messages == CONVERSATION
    assert CtxStoreChatMessageHistory("thread-2", store).messages == []


def test_stored_as_openai_messages_with_tool_calls(store):
    history = CtxStoreChatMessageHistory("thread-3", store)
    history.add_messages(CONVERSATION)
    stored = store.visible(history.context_id).messages
    assert [m.role for m in stored] == [
        "system", "user", "assistant", "tool", "tool", "assistant", "developer"
    ]  # fmt: skip
    calls = stored[2].tool_calls or []
    assert [c.id for c in calls] == ["call_1", "call_2"]
    assert calls[1].function.arguments == '{"city": "\\u4e0a\\u6d77", "days": [1, 2]}'
    assert stored[3].tool_call_id == "call_1" and stored[5].content == "Paris 22°C, \n上海 18°C."
    # The store's own checks apply: a tool result with no call is refused, nothing written.
    before = store.visible(history.context_id).version
    with pytest.raises(MalformedTranscriptError):
        history.add_messages([ToolMessage("orphan", tool_call_id="nope")])
    assert store.visible(history.context_id).version == before


def test_messages_other_clients_wrote_convert_to_langchain(store):
    history = CtxStoreChatMessageHistory("thread-4", store)
    store.insert(history.context_id, [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi", "name": "bo"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c9", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}
        ]},
        {"role": "tool", "tool_call_id": "c9", "content": "ok"},
        {"role": "assistant", "content": "done"},
        {"role": "assistant", "content": None, "audio": {"id": "audio_7"}},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "k2", "type": "custom", "custom": {"name": "sql", "input": "SELECT 1"}}
        ]},
        {"role": "tool", "tool_call_id": "k2", "content": "1"},
    ])  # fmt: skip
    got = history.messages
    assert [type(m) for m in got] == [
        SystemMessage,
        HumanMessage,
        AIMessage,
        ToolMessage,
        AIMessage,
        AIMessage,
        AIMessage,
        ToolMessage,
    ]
    assert got[5].additional_kwargs == {"audio": {"id": "audio_7"}}  # as langchain-openai keeps it
    # LangChain's tool calls carry JSON arguments: a custom tool's input goes in as {"input": ...}
    assert got[6].tool_calls == [
        {"name": "sql", "args": {"input": "SELECT 1"}, "id": "k2", "type": "tool_call"}
    ]
    assert got[1].name == "bo" and got[1].content == "hi"
    assert got[2].tool_calls == [{"name": "f", "args": {"x": 1}, "id": "c9", "type": "tool_call"}]
    assert isinstance(got[3], ToolMessage) and got[3].tool_call_id == "c9"
    # And back: converting them again gives the same OpenAI shape.
    again = [to_openai(m) for m in got]
    assert again[2]["tool_calls"][0]["function"] == {"name": "f", "arguments": '{"x": 1}'}
    assert from_openai(Message.model_validate(again[4])) == got[4]


def test_clear_hides_everything_and_keeps_the_audit(store):
    history = CtxStoreChatMessageHistory("thread-5", store)
    history.add_messages(CONVERSATION[:2])
    history.clear()
    assert history.messages == []
    assert [h.type for h in store.history(history.context_id)] == ["create", "insert", "delete"]
    history.add_message(HumanMessage("again"))
    assert [m.content for m in history.messages] == ["again"]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # still LangChain's documented API
def test_runnable_with_message_history_works_unchanged(store):
    prompt = ChatPromptTemplate.from_messages(
        [("system", "Be brief."), MessagesPlaceholder("history"), ("human", "{question}")]
    )
    chain = prompt | FakeListChatModel(responses=["Paris.", "Also Paris."])
    with_history = RunnableWithMessageHistory(
        chain,
        lambda sid: CtxStoreChatMessageHistory(sid, store),
        input_messages_key="question",
        history_messages_key="history",
    )
    config = {"configurable": {"session_id": "runnable-1"}}
    with_history.invoke({"question": "Capital of France?"}, config=config)
    with_history.invoke({"question": "Again?"}, config=config)
    got = CtxStoreChatMessageHistory("runnable-1", store).messages
    assert [(type(m).__name__, m.content) for m in got] == [
        ("HumanMessage", "Capital of France?"),
        ("AIMessage", "Paris."),
        ("HumanMessage", "Again?"),
        ("AIMessage", "Also Paris."),
    ]
