"""A LlamaIndex chat store on ctxstore (`pip install 'ctxstore[llamaindex]'`).

    chat_store = CtxStoreChatStore(ctxstore.open("sqlite:///chats.db"))   # or a client
    memory = ChatMemoryBuffer.from_defaults(chat_store=chat_store, chat_store_key="user-1")

Each key is a context (found by its key, `llamaindex:<key>`, and named the same), opened by a record that anchors it (so a message can go first). Each ChatMessage
is one message keeping LlamaIndex's own serialization in its metadata, from which it is
read back equal: as the chat message it stands for (role, text, tool calls and the tool
result answering one), so the context reads as the conversation and counts its tokens; a
message the transcript could not hold there (a tool result with no call before it, which
LlamaIndex's stores accept) is kept as a record, in its place, never sent to a model.

LlamaIndex addresses messages by their index; each index is resolved to the message's
stable id when the command runs (`delete_message(key, 2)` deletes the message that was
third when it was asked, and the history says which one). `delete_messages` erases the
key's context (crypto-shredded where keys are on); a key used again starts anew. The
results, and what raises, are those of LlamaIndex's `SimpleChatStore` (a differential test
drives both with the same random operations).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any
from uuid import UUID

from ctxstore.domain.errors import (
    InvalidOperationError,
    MalformedTranscriptError,
    MissingExtraError,
)

try:
    from llama_index.core.bridge.pydantic import PrivateAttr
    from llama_index.core.llms import ChatMessage
    from llama_index.core.storage.chat_store.base import BaseChatStore
except ModuleNotFoundError as exc:  # the extra is not installed: say which
    raise MissingExtraError("the LlamaIndex chat store", "llamaindex") from exc

from ctxstore.adapters.integrations.sdk_messages import as_record, chat_role, insert_or_record
from ctxstore.adapters.integrations.surface import faces, named_contexts
from ctxstore.adapters.store.contract import ContextOperations
from ctxstore.adapters.store.contract_async import AsyncContextOperations
from ctxstore.domain.messages import Message
from ctxstore.domain.plain import is_record

KEY = "llamaindex"  # metadata key of LlamaIndex's serialization
ANCHOR = "llamaindex_key"  # metadata key of the record opening a key's context
OPENED = "llamaindex_opened"  # when that record was written (ns): the key's place in get_keys


def _chat(message: ChatMessage, kept: dict[str, Any]) -> dict[str, Any]:
    """The chat message a LlamaIndex message stands for, keeping it in its metadata."""
    role = chat_role(str(message.role.value))
    extra = message.additional_kwargs or {}
    body: dict[str, Any] = {"role": role, "content": message.content or ""}
    if role == "assistant" and extra.get("tool_calls"):
        body["tool_calls"] = [_call(c) for c in extra["tool_calls"]]
        body["content"] = message.content or None
    if role == "tool":
        body["tool_call_id"] = str(extra.get("tool_call_id") or extra.get("name") or "")
    body["metadata"] = {KEY: kept}
    return body


def _call(call: Any) -> dict[str, Any]:
    """A tool call as LlamaIndex's OpenAI integration keeps it (a dict or the SDK's object)."""
    data = call if isinstance(call, dict) else getattr(call, "model_dump", dict)()
    function = data.get("function") or {}
    arguments = function.get("arguments", "")
    return {"id": str(data.get("id", "")), "type": "function",
            "function": {"name": str(function.get("name", "")),
                         "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments)}}  # fmt: skip


class CtxStoreChatStore(BaseChatStore):
    """LlamaIndex's BaseChatStore on a ctxstore store, async store or HTTP client."""

    _store: ContextOperations = PrivateAttr()
    _prefix: str = PrivateAttr()

    def __init__(
        self, store: ContextOperations | AsyncContextOperations, *,
        key_prefix: str = "llamaindex:", **data: Any,
    ) -> None:  # fmt: skip
        super().__init__(**data)
        self._store = faces(store).sync
        self._prefix = key_prefix

    @classmethod
    def class_name(cls) -> str:
        return "CtxStoreChatStore"

    # ---- keys and their contexts ------------------------------------------------------------

    def _find(self, key: str) -> tuple[UUID, str, list[Message]] | None:
        """A key's context, its anchor and its messages; None for a key not in use (never
        used, or deleted)."""
        cid: UUID | None = self._store.lookup_key(self._prefix + key)
        if cid is None:
            return None
        anchor, held = self._held(cid)
        return None if anchor is None else (cid, anchor, held)

    def _open(self, key: str) -> UUID:
        cid: UUID = self._store.context_for_key(
            self._prefix + key, name=self._prefix + key, metadata={"llamaindex_key": key}
        )
        if not any(ANCHOR in m.metadata for m in self._store.visible(cid).messages):
            # a new key (or one deleted on a store without erasure): its anchor goes first
            # `opened`: the key's place in get_keys, as a dict's insertion order (a key
            # deleted on a store without erasure and set again goes last, not where it was)
            self._store.insert(cid, as_record({ANCHOR: key, OPENED: time.time_ns()}))
        return cid

    def _held(self, cid: UUID) -> tuple[str | None, list[Message]]:
        """(the anchor's id, the messages LlamaIndex stored, in order)."""
        anchor = None
        held = []
        for m in self._store.visible(cid, inline=True).messages:
            if ANCHOR in m.metadata:
                anchor = m.id
            elif isinstance(m.metadata.get(KEY), dict):
                held.append(m)
        return anchor, held

    # ---- the contract -------------------------------------------------------------------------

    def set_messages(self, key: str, messages: list[ChatMessage]) -> None:
        cid = self._open(key)
        _, held = self._held(cid)
        if held:
            self._store.delete(cid, [str(m.id) for m in held])
        for message in messages:
            self._add(cid, message, None)

    def get_messages(self, key: str) -> list[ChatMessage]:
        found = self._find(key)
        return [] if found is None else [_message(m) for m in found[2]]

    def add_message(self, key: str, message: ChatMessage, idx: int | None = None) -> None:
        self._add(self._open(key), message, idx)

    def _add(self, cid: UUID, message: ChatMessage, idx: int | None) -> None:
        after = None
        if idx is not None:
            anchor, held = self._held(cid)
            place = max(len(held) + idx, 0) if idx < 0 else min(idx, len(held))  # list.insert's
            after = anchor if place == 0 else held[place - 1].id
            if place == len(held):
                after = None
        kept = json.loads(message.model_dump_json())
        # (a message the transcript refuses is kept in its place as a record, never sent)
        insert_or_record(
            self._store, cid, _chat(message, kept), lambda: as_record({KEY: kept}), after=after
        )

    def delete_messages(self, key: str) -> list[ChatMessage] | None:
        found = self._find(key)
        if found is None:
            return None
        cid, anchor, held = found
        try:
            self._store.erase(cid, reason="LlamaIndex delete_messages")
        except InvalidOperationError:  # refused (forks hold copies): hide the key and messages
            self._store.delete(cid, [anchor, *(str(m.id) for m in held)])
        return [_message(m) for m in held]

    def delete_message(self, key: str, idx: int) -> ChatMessage | None:
        found = self._find(key)
        if found is None:
            return None
        cid, _, held = found
        if idx >= len(held):
            return None
        doomed = held[idx]  # (a negative index counts from the end; past it: IndexError)
        self._delete(cid, held, doomed)
        return _message(doomed)

    def delete_last_message(self, key: str) -> ChatMessage | None:
        found = self._find(key)
        if found is None:
            return None
        cid, _, held = found
        if not held:
            raise IndexError("pop from empty list")  # as SimpleChatStore says it
        self._delete(cid, held, held[-1])
        return _message(held[-1])

    def _delete(self, cid: UUID, held: list[Message], doomed: Message) -> None:
        """Delete one message. Where that would split a tool call from its result (which
        LlamaIndex's stores allow), the call and its results go, and those that stay are
        written back in their place as records."""
        try:
            self._store.delete(cid, [str(doomed.id)])
            return
        except MalformedTranscriptError:
            pass
        block = _block(held, doomed)
        self._store.delete(cid, [str(m.id) for m in block])
        now: dict[str, str] = {}  # a message written back: its old id -> its new one
        for m in block:  # each one that stays, back in its place as a record
            if m is doomed:
                continue
            at = held.index(m)
            before = next(
                (h for h in reversed(held[:at]) if h not in block or str(h.id) in now), None
            )
            after = self._find_anchor(cid) if before is None else now.get(str(before.id), before.id)
            written = self._store.insert(cid, as_record({KEY: m.metadata[KEY]}), after=after)
            now[str(m.id)] = written.ids[0]

    def _find_anchor(self, cid: UUID) -> str | None:
        return self._held(cid)[0]

    def get_keys(self) -> list[str]:
        found = []
        for n, c in enumerate(named_contexts(self._store, self._prefix)):
            opened = self._opened(c.context_id)
            if opened is not None:  # (not deleted on a store without erasure)
                found.append((opened, n, str(c.name)[len(self._prefix) :]))
        return [key for _, _, key in sorted(found)]

    def _opened(self, cid: UUID) -> int | None:
        """When the key's anchor was written (0: before anchors said); None: deleted."""
        for m in self._store.visible(cid).messages:
            if ANCHOR in m.metadata:
                opened = m.metadata.get(OPENED)
                return opened if isinstance(opened, int) else 0
        return None

    # ---- async: the sync methods on a worker thread (each one command or read) -----------------

    async def aset_messages(self, key: str, messages: list[ChatMessage]) -> None:
        await asyncio.to_thread(self.set_messages, key, messages)

    async def aget_messages(self, key: str) -> list[ChatMessage]:
        return await asyncio.to_thread(self.get_messages, key)

    async def async_add_message(
        self, key: str, message: ChatMessage, idx: int | None = None
    ) -> None:
        await asyncio.to_thread(self.add_message, key, message, idx)

    async def adelete_messages(self, key: str) -> list[ChatMessage] | None:
        return await asyncio.to_thread(self.delete_messages, key)

    async def adelete_message(self, key: str, idx: int) -> ChatMessage | None:
        return await asyncio.to_thread(self.delete_message, key, idx)

    async def adelete_last_message(self, key: str) -> ChatMessage | None:
        return await asyncio.to_thread(self.delete_last_message, key)

    async def aget_keys(self) -> list[str]:
        return await asyncio.to_thread(self.get_keys)


def _block(held: list[Message], member: Message) -> list[Message]:
    """The messages a tool call goes with: the call and the results answering it."""
    at = held.index(member)
    start = at
    if member.tool_call_id is not None:  # a result: back to the call it answers
        while start > 0 and member.tool_call_id not in held[start].call_ids:
            start -= 1
    calls = set(held[start].call_ids)
    block = [held[start]]
    for m in held[start + 1 :]:
        if m.tool_call_id in calls:
            block.append(m)
        elif not is_record(m):
            break  # (records between a call and its results stand outside the rules)
    return block


def _message(m: Message) -> ChatMessage:
    return ChatMessage.model_validate(m.metadata[KEY])


__all__ = ["CtxStoreChatStore"]
