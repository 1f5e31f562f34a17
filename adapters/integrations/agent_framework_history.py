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

import asyncio
import json
from collections.abc import Sequence
from typing import Any

from ctxstore.domain.errors import (
    InvalidMessageError,
    MalformedTranscriptError,
    MissingExtraError,
)

try:
    from agent_framework import HistoryProvider, Message
    from agent_framework._sessions import filter_new_messages
except ModuleNotFoundError as exc:  # the extra is not installed: say which
    raise MissingExtraError("the Agent Framework history provider", "agent-framework") from exc

from ctxstore.adapters.integrations.surface import faces
from ctxstore.domain.plain import RECORD_MARK

KEY = "agent_framework"  # metadata key of Agent Framework's serialization
ROLES = {"system": "system", "developer": "developer", "user": "user", "assistant": "assistant",
         "tool": "tool"}  # fmt: skip


def chat_messages(message: Message) -> list[dict[str, Any]]:
    """The chat messages a Message stands for (a tool message holding several results is
    one per result), the first keeping the Message itself."""
    kept = message.to_dict()
    role = ROLES.get(str(message.role), "user")
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
        self, store: Any, source_id: str | None = None, *, key_prefix: str = "agent-framework:",
        **options: Any,
    ) -> None:  # fmt: skip
        super().__init__(source_id or self.DEFAULT_SOURCE_ID, **options)
        self.store, self._async = faces(store)
        self.prefix = key_prefix

    async def get_messages(
        self, session_id: str | None, *, state: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[Message]:
        if session_id is None:
            return []
        cid = await self._call("lookup_key", self.prefix + session_id)
        if cid is None:
            return []
        seen = await self._call("visible", cid, inline=True)
        return [Message.from_dict(m.metadata[KEY]) for m in seen.messages
                if isinstance(m.metadata.get(KEY), dict)]  # fmt: skip

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
        cid = await self._call(
            "context_for_key", self.prefix + session_id, name=self.prefix + session_id,
            metadata={"agent_framework_session_id": session_id},
        )  # fmt: skip
        batch = [c for m in new for c in chat_messages(m)]
        try:
            await self._call("insert", cid, batch)
        except (MalformedTranscriptError, InvalidMessageError):
            # One by one, each the transcript cannot hold kept as a record in its place.
            for m in new:
                parts = chat_messages(m)
                try:
                    await self._call("insert", cid, parts)
                except (MalformedTranscriptError, InvalidMessageError):
                    record = {"role": "developer", "content": "",
                              "metadata": {**RECORD_MARK, KEY: m.to_dict()}}  # fmt: skip
                    await self._call("insert", cid, record)

    async def _call(self, operation: str, /, *args: Any, **kwargs: Any) -> Any:
        """An operation on the async face when there is one, else on a worker thread."""
        if self._async is not None:
            return await getattr(self._async, operation)(*args, **kwargs)
        return await asyncio.to_thread(getattr(self.store, operation), *args, **kwargs)


__all__ = ["CtxStoreHistoryProvider", "chat_messages"]
