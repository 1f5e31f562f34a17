"""A LangChain chat message history stored in ctxstore (extra `ctxstore[langchain]`).

    history = CtxStoreChatMessageHistory("thread-7", ctxstore.open())   # or a CtxStoreClient
    RunnableWithMessageHistory(chain, lambda sid: CtxStoreChatMessageHistory(sid, store))

Each LangChain message is stored as the OpenAI-format message it stands for (roles, text,
tool calls and tool results, so token counts, prompts and compaction understand it) and,
in its metadata, LangChain's own serialization, from which it is rebuilt exactly: ids,
names, tool calls, additional_kwargs, response and usage metadata. Messages that other
clients wrote in OpenAI format are converted to LangChain's types.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ctxstore.domain.errors import MissingExtraError

try:
    from langchain_core.chat_history import BaseChatMessageHistory
    from langchain_core.messages import (
        AIMessage,
        BaseMessage,
        ChatMessage,
        SystemMessage,
        ToolMessage,
        convert_to_messages,
        message_to_dict,
        messages_from_dict,
    )
except ModuleNotFoundError as exc:  # the extra is not installed: say which
    raise MissingExtraError("the LangChain chat history", "langchain") from exc

from ctxstore.adapters.store.contract import ContextOperations as ContextBackend
from ctxstore.domain.context import JSON
from ctxstore.domain.messages import Message

KEY = "langchain"  # metadata key of LangChain's serialization


def _text(content: str | list[Any]) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and isinstance(block.get("text"), str):
            parts.append(block["text"])
    return "\n".join(parts)


def to_openai(message: BaseMessage) -> JSON:
    """The OpenAI-format ctxstore message of a LangChain message, which keeps the original."""
    text = _text(message.content)
    body: JSON
    if isinstance(message, AIMessage):
        body = {"role": "assistant", "content": text}
        if message.tool_calls:
            body["tool_calls"] = [
                {
                    "id": call["id"],
                    "type": "function",
                    "function": {"name": call["name"], "arguments": json.dumps(call["args"])},
                }
                for call in message.tool_calls
            ]
    elif isinstance(message, ToolMessage):
        body = {"role": "tool", "tool_call_id": message.tool_call_id, "content": text}
    elif isinstance(message, SystemMessage):
        body = {"role": "system", "content": text}
    elif isinstance(message, ChatMessage) and message.role in ("system", "developer", "user"):
        body = {"role": message.role, "content": text}
    elif isinstance(message, ChatMessage) and message.role == "assistant":
        body = {"role": "assistant", "content": text}
    else:  # human, and any other kind: input to the model
        body = {"role": "user", "content": text}
    if message.name and body["role"] != "tool":
        body["name"] = message.name
    body["metadata"] = {KEY: message_to_dict(message)}
    return body


def _langchain_call(call: JSON) -> JSON:
    """A tool call as LangChain's message conversion takes it. LangChain's tool calls carry
    JSON arguments: a custom tool's free-form input goes in as {"input": ...}."""
    if call.get("type") != "custom":
        return call
    custom = call["custom"]
    return {"name": custom["name"], "args": {"input": custom["input"]}, "id": call["id"],
            "type": "tool_call"}  # fmt: skip


def from_openai(message: Message) -> BaseMessage:
    """The LangChain message a stored ctxstore message stands for."""
    kept = message.metadata.get(KEY)
    if isinstance(kept, dict):
        return messages_from_dict([kept])[0]
    plain = message.model_dump(mode="json", exclude_none=True, exclude={"metadata"})
    plain.pop("refusal", None)
    if plain.get("tool_calls"):
        plain["tool_calls"] = [_langchain_call(c) for c in plain["tool_calls"]]
    audio = plain.pop("audio", None)  # LangChain keeps an audio reply's id beside the message
    if plain["role"] == "developer":
        plain["role"] = "system"
    if "content" not in plain:
        plain["content"] = ""
    converted = convert_to_messages([plain])[0]
    if converted.id is None:
        converted.id = message.id
    if audio is not None:
        converted.additional_kwargs["audio"] = audio
    return converted


class CtxStoreChatMessageHistory(BaseChatMessageHistory):
    """LangChain's chat history protocol on a ctxstore context named by the session id."""

    def __init__(
        self, session_id: str, store: ContextBackend, *, key_prefix: str = "langchain:"
    ) -> None:
        self.session_id = session_id
        self.store = store
        self.context_id = store.context_for_key(
            key_prefix + session_id, name=f"langchain history {session_id}",
            metadata={"langchain_session_id": session_id},
        )  # fmt: skip

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The visible messages, as LangChain messages, in order."""
        return [from_openai(m) for m in self.store.visible(self.context_id, inline=True).messages]

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append messages in one event."""
        if messages:
            batch = [to_openai(m) for m in messages]
            self.store.insert(self.context_id, batch, expected_version=None)

    def clear(self) -> None:
        """Hide every message (one delete event; the history stays in the audit)."""
        seen = self.store.visible(self.context_id, inline=True)
        ids = [m.id for m in seen.messages if m.id is not None]
        if ids:
            self.store.delete(self.context_id, ids, expected_version=None)
