"""How an integration writes an SDK's messages into a context: each as the chat role it
stands for, and, where the transcript refuses one (a tool result with no call before it, a
call answered only after other turns: what the SDKs' own stores accept), as a record in
its place instead: kept in the context's history and read back with it, never sent to a
model. What an integration keeps besides its messages (a state, a checkpoint) is a record
too."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any
from uuid import UUID

from ctxstore.adapters.store.contract import ContextOperations
from ctxstore.adapters.store.contract_async import AsyncContextOperations
from ctxstore.adapters.store.results import Written
from ctxstore.domain.context import JSON, MessageRef
from ctxstore.domain.errors import CtxStoreError, InvalidMessageError, MalformedTranscriptError
from ctxstore.domain.plain import RECORD_MARK

# The chat roles of the names SDKs give their messages' roles (LlamaIndex's chatbot, model
# and function among them); any other name is input to the model: user.
CHAT_ROLES = {"system": "system", "developer": "developer", "user": "user",
              "assistant": "assistant", "tool": "tool", "chatbot": "assistant",
              "model": "assistant", "function": "tool"}  # fmt: skip

Refusals = tuple[type[CtxStoreError], ...]
# What a transcript refuses, and a record keeps instead: a message it cannot hold where it
# would go (a call parted from its result), or one that is no message of its shape (an SDK's
# tool result naming no call). Nothing else: a message too large, a missing attachment, a
# racing writer are the caller's to hear.
REFUSED: Refusals = (MalformedTranscriptError, InvalidMessageError)


def chat_role(role: str) -> str:
    """The chat role an SDK's role stands for (CHAT_ROLES)."""
    return CHAT_ROLES.get(role, "user")


def as_record(metadata: Mapping[str, Any]) -> JSON:
    """The record keeping `metadata` (an SDK's own serialization of what it stands for)."""
    return {"role": "developer", "content": "", "metadata": {**RECORD_MARK, **metadata}}


def insert_or_record(
    store: ContextOperations, context_id: UUID, message: JSON | Sequence[JSON],
    record: Callable[[], JSON], *, after: MessageRef | None = None,
    expected_version: int | None = None, refused: Refusals = REFUSED,
) -> Written:  # fmt: skip
    """Insert `message` (one SDK message: one or more chat messages); where the transcript
    refuses it (`refused`), its `record` in its place, at the same place and version."""
    try:
        return store.insert(context_id, message, after=after, expected_version=expected_version)
    except refused:
        return store.insert(context_id, record(), after=after, expected_version=expected_version)


async def insert_or_record_awaited(
    store: AsyncContextOperations, context_id: UUID, message: JSON | Sequence[JSON],
    record: Callable[[], JSON], *, after: MessageRef | None = None,
    expected_version: int | None = None, refused: Refusals = REFUSED,
) -> Written:  # fmt: skip
    """`insert_or_record` on the async face."""
    try:
        return await store.insert(
            context_id, message, after=after, expected_version=expected_version
        )
    except refused:
        return await store.insert(
            context_id, record(), after=after, expected_version=expected_version
        )


__all__ = [
    "CHAT_ROLES", "REFUSED", "Refusals", "as_record", "chat_role", "insert_or_record",
    "insert_or_record_awaited",
]  # fmt: skip
