"""A Microsoft Agent Framework history provider on ctxstore
(`pip install 'ctxstore[agent-framework]'`).

    history = CtxStoreHistoryProvider(ctxstore.open("sqlite:///agents.db"))   # or a client
    agent = Agent(client=chat_client, context_providers=[history])

Each session is a context (found by its key, `agent-framework:<session id>`). Each Message
is one ctxstore message keeping Agent Framework's own serialization (`to_dict()`), from
which it is read back equal, stored as the chat message it stands for: its text, its
function calls as tool calls and each function result as the tool message answering its
call, so the context reads as the conversation, counts its tokens and pairs each call
with its result. A message the transcript could not hold there is kept as a record in its
place, never sent to a model. Saving a run's messages appends what the session does not
hold yet, by Agent Framework's own rule (`filter_new_messages`: a replayed transcript is
not stored twice), as its InMemoryHistoryProvider does; one save is one command.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from ctxstore.domain.errors import MissingExtraError

try:
    from agent_framework import HistoryProvider, Message
    from agent_framework._sessions import filter_new_messages
except ModuleNotFoundError as exc:  # the extra is not installed: say which
    raise MissingExtraError("the Agent Framework history provider", "agent-framework") from exc

from ctxstore.adapters.integrations.sdk_messages import (
    REFUSED,
    as_record,
    chat_role,
    insert_or_record,
    insert_or_record_awaited,
)
from ctxstore.adapters.integrations.surface import faces
from ctxstore.adapters.store.contract import ContextOperations
from ctxstore.adapters.store.contract_async import AsyncContextOperations

KEY = "agent_framework"  # metadata key of Agent Framework's serialization


def chat_messages(message: Message) -> list[dict[str, Any]]:
    """The chat messages a Message stands for (a tool message holding several results is
    one per result), the first keeping the Message itself."""
    kept = message.to_dict()
    role = chat_role(str(message.role))
    text = message.text or ""
    calls: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for c in message.contents:
        if c.type == "function_call":
            arguments = (
                c.arguments if isinstance(c.arguments, str) else json.dumps(c.arguments or {})
            )
            calls.append({"id": str(c.call_id), "type": "function",
                          "function": {"name": str(c.name), "arguments": arguments}})  # fmt: skip
        elif c.type == "function_result":
            result = c.result if isinstance(c.result, str) else json.dumps(c.result, default=str)
            results.append({"role": "tool", "tool_call_id": str(c.call_id), "content": result})
    out: list[dict[str, Any]]
    if results:
        out = results
    else:
        body: dict[str, Any] = {"role": role, "content": text if text or not calls else None}
        if calls and role == "assistant":
            body["tool_calls"] = calls
        out = [body]
    out[0]["metadata"] = {KEY: kept}
    for extra in out[1:]:
        extra["metadata"] = {KEY: None}  # (read with the first)
    return out


class CtxStoreHistoryProvider(HistoryProvider):
    """Agent Framework's HistoryProvider on a ctxstore store, async store or HTTP client."""

    DEFAULT_SOURCE_ID = "ctxstore"

    def __init__(
        self, store: ContextOperations | AsyncContextOperations, source_id: str | None = None,
        *, key_prefix: str = "agent-framework:", **options: Any,
    ) -> None:  # fmt: skip
        super().__init__(source_id or self.DEFAULT_SOURCE_ID, **options)
        self._faces = faces(store)  # the async face awaited when given one, else threads
        self.store = self._faces.sync
        self.prefix = key_prefix

    async def get_messages(
        self, session_id: str | None, *, state: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[Message]:
        if session_id is None:
            return []
        key = self.prefix + session_id
        cid = await self._faces.read(lambda s: s.lookup_key(key), lambda a: a.lookup_key(key))
        if cid is None:
            return []
        seen = await self._faces.read(
            lambda s: s.visible(cid, inline=True), lambda a: a.visible(cid, inline=True)
        )
        return [Message.from_dict(kept) for m in seen.messages
                if isinstance(kept := m.metadata.get(KEY), dict)]  # fmt: skip

    async def save_messages(
        self, session_id: str | None, messages: Sequence[Message], *,
        state: dict[str, Any] | None = None, **kwargs: Any,
    ) -> None:  # fmt: skip
        if session_id is None or not messages:
            return
        existing = await self.get_messages(session_id)
        new = filter_new_messages(existing, list(messages))
        if not new:
            return
        key = self.prefix + session_id
        about = {"agent_framework_session_id": session_id}
        cid = await self._faces.write(
            lambda s: s.context_for_key(key, name=key, metadata=about),
            lambda a: a.context_for_key(key, name=key, metadata=about),
        )
        batch = [c for m in new for c in chat_messages(m)]
        try:
            await self._faces.write(lambda s: s.insert(cid, batch), lambda a: a.insert(cid, batch))
        except REFUSED:  # one by one, each the transcript refuses kept as a record in its place
            for m in new:
                await self._insert_or_record(cid, m)

    async def _insert_or_record(self, cid: UUID, message: Message) -> None:
        parts = chat_messages(message)

        def record() -> dict[str, Any]:
            return as_record({KEY: message.to_dict()})

        await self._faces.write(
            lambda s: insert_or_record(s, cid, parts, record),
            lambda a: insert_or_record_awaited(a, cid, parts, record),
        )


__all__ = ["CtxStoreHistoryProvider", "chat_messages"]
