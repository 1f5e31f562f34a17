"""A Pydantic AI conversation store on ctxstore (`pip install 'ctxstore[pydantic-ai]'`).

    conversations = CtxStoreConversationStore(ctxstore.open("sqlite:///chats.db"))
    conversation = await conversations.load(cid) or Conversation(conversation_id=cid)
    result = await agent.run(prompt, conversation=conversation)
    await conversations.save(result)

Pydantic AI's `ConversationStore` does the logic (which messages are new, where a history
branches, what a fork shares, revisions); this backend gives it its five primitives on
ctxstore. Each conversation is a context (found by its key, `pydantic-ai:<id>`), holding:

- each entry first saved through it, as one message: the text the ModelMessage carries
  (a request's system and user prompts, a response's text) as a system, user or assistant
  turn — so the context reads as the conversation — with the entry (its id, its parent and
  the message as Pydantic AI serializes it) in the metadata, read back exactly; tool calls
  and returns travel inside the entry, not as turns;
- the conversation's record (head, usage, deferred tool requests, scope, branches, fork
  origin, revision) as a record, the newest one the current.

A save of a record and its new entries is one insert, conditional on the context's version:
a writer whose revision is stale gets `ConversationConflict` and nothing is written. A fork
is a context whose history continues from an entry of its source's (`forked_from`): reading
it follows its own entries, then the source's. Deleting a conversation erases its context
when no other conversation's history reaches its entries; otherwise its record is replaced
by a tombstone (so a fork can still be followed) and the entries no history reaches are
deleted — as Pydantic AI's in-memory store collects unreachable entries.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from ctxstore.domain.errors import (
    CtxStoreError,
    InvalidOperationError,
    MissingExtraError,
    VersionConflictError,
)

log = logging.getLogger(__name__)

try:
    from pydantic import TypeAdapter
    from pydantic_ai.conversation_store import (
        ConversationConflict,
        ConversationEntry,
        ConversationRecord,
        ConversationStore,
    )
    from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse
except ModuleNotFoundError as exc:  # the extra is not installed: say which
    raise MissingExtraError("the Pydantic AI conversation store", "pydantic-ai") from exc

from ctxstore.adapters.integrations.sdk_messages import as_record
from ctxstore.adapters.integrations.surface import faces, named_contexts
from ctxstore.adapters.store.contract import ContextOperations
from ctxstore.adapters.store.contract_async import AsyncContextOperations
from ctxstore.domain.messages import Message
from ctxstore.domain.plain import is_record

KEY = "pydantic_ai"  # metadata key of what this store keeps
RECORDS: TypeAdapter[ConversationRecord] = TypeAdapter(ConversationRecord)
MESSAGE: TypeAdapter[ModelMessage] = TypeAdapter(ModelMessage)


@dataclass
class _Held:
    """One conversation's context as read: its entries, record, tombstone."""

    cid: UUID
    version: int
    entries: dict[str, tuple[dict[str, Any], str]] = field(
        default_factory=dict
    )  # id -> (kept, msg id)
    record: dict[str, Any] | None = None
    record_ids: list[str] = field(default_factory=list)  # the record messages, oldest first
    tombstone: dict[str, Any] | None = None

    @classmethod
    def read(cls, cid: UUID, version: int, messages: Sequence[Message]) -> _Held:
        found = cls(cid, version)
        for m in messages:
            found_kept = m.metadata.get(KEY)
            if not isinstance(found_kept, dict):
                continue
            kept: dict[str, Any] = found_kept
            if kept.get("kind") == "entry":
                found.entries[str(kept["id"])] = (kept, str(m.id))
            elif kept.get("kind") == "record":
                found.record, found.tombstone = kept["record"], None
                found.record_ids.append(str(m.id))
            elif kept.get("kind") == "deleted":
                found.record, found.tombstone = None, kept
                found.record_ids.append(str(m.id))
        return found

    @property
    def forked_from(self) -> str | None:
        held = self.record or self.tombstone or {}
        origin = held.get("forked_from")
        return None if origin is None else str(origin)


def _turn(message: ModelMessage) -> dict[str, Any]:
    """The turn a ModelMessage reads as: its system, user or assistant text."""
    if isinstance(message, ModelResponse):
        texts = [p.content for p in message.parts if p.part_kind == "text"]
        return {"role": "assistant", "content": "\n".join(texts)}
    assert isinstance(message, ModelRequest)
    system = [str(p.content) for p in message.parts if p.part_kind == "system-prompt"]
    user = [p.content if isinstance(p.content, str) else "" for p in message.parts
            if p.part_kind == "user-prompt"]  # fmt: skip
    if user or not system:
        return {"role": "user", "content": "\n".join([*system, *user])}
    return {"role": "system", "content": "\n".join(system)}


def _entry_message(entry: ConversationEntry) -> dict[str, Any]:
    kept = {"kind": "entry", "id": entry.id, "parent_id": entry.parent_id,
            "message": MESSAGE.dump_python(entry.message, mode="json")}  # fmt: skip
    return {**_turn(entry.message), "metadata": {KEY: kept}}


def _entry(kept: dict[str, Any]) -> ConversationEntry:
    return ConversationEntry(
        id=kept["id"], parent_id=kept["parent_id"], message=MESSAGE.validate_python(kept["message"])
    )


def _record_message(record: ConversationRecord) -> dict[str, Any]:
    kept = {"kind": "record", "record": RECORDS.dump_python(record, mode="json")}
    return as_record({KEY: kept})


class CtxStoreConversationStore(ConversationStore):
    """Pydantic AI's ConversationStore on a ctxstore store, async store or HTTP client."""

    def __init__(
        self, store: ContextOperations | AsyncContextOperations, *, key_prefix: str = "pydantic-ai:"
    ) -> None:
        self.store = faces(store).sync
        self.prefix = key_prefix

    # ---- reading a conversation's context -------------------------------------------------

    def _cid(self, conversation_id: str) -> UUID | None:
        found: UUID | None = self.store.lookup_key(self.prefix + conversation_id)
        return found

    def _held(self, conversation_id: str) -> _Held | None:
        cid = self._cid(conversation_id)
        if cid is None:
            return None
        seen = self.store.visible(cid)
        return _Held.read(cid, seen.version, seen.messages)

    def _locate(self, entry_id: str, start: str | None) -> tuple[dict[str, Any], _Held] | None:
        """An entry, looked for in conversation `start` and the ones it was forked from."""
        seen: set[str] = set()
        name = start
        while name is not None and name not in seen:
            seen.add(name)
            held = self._held(name)
            if held is None:
                return None
            if entry_id in held.entries:
                return held.entries[entry_id][0], held
            name = held.forked_from
        return None

    def _history(
        self, conversation_id: str, head_id: str | None, limit: int | None
    ) -> list[ConversationEntry]:
        entries: list[ConversationEntry] = []
        cache: dict[str, _Held | None] = {}
        name: str | None = conversation_id
        entry_id = head_id
        while entry_id is not None and (limit is None or len(entries) < limit):
            found = None
            while name is not None:
                held = cache[name] if name in cache else cache.setdefault(name, self._held(name))
                if held is not None and entry_id in held.entries:
                    found = held.entries[entry_id][0]
                    break
                name = None if held is None else held.forked_from
            if found is None:
                raise LookupError(f"entry {entry_id!r} is not stored")
            entries.append(_entry(found))
            entry_id = found["parent_id"]
        entries.reverse()
        return entries

    # ---- the five primitives ----------------------------------------------------------------

    async def read_record(self, conversation_id: str) -> ConversationRecord | None:
        held = await asyncio.to_thread(self._held, conversation_id)
        if held is None or held.record is None:
            return None
        return RECORDS.validate_python(held.record)

    async def read_records(
        self, *, scope: str | None = None, limit: int | None = None
    ) -> Sequence[ConversationRecord]:
        def read() -> list[ConversationRecord]:
            found = []
            for c in named_contexts(self.store, self.prefix):
                held = self._held(str(c.name)[len(self.prefix) :])
                if held is not None and held.record is not None:
                    record = RECORDS.validate_python(held.record)
                    if scope is None or record.scope == scope:
                        found.append(record)
            found.sort(key=lambda r: r.updated_at, reverse=True)
            return found[:limit]

        return await asyncio.to_thread(read)

    async def write_record(
        self, record: ConversationRecord, *, new_entries: Sequence[ConversationEntry] = (),
        expected_revision: str | None,
    ) -> None:  # fmt: skip
        await asyncio.to_thread(self._write, record, list(new_entries), expected_revision)

    def _write(
        self, record: ConversationRecord, new_entries: list[ConversationEntry],
        expected_revision: str | None,
    ) -> None:  # fmt: skip
        name = record.conversation_id
        while True:
            held = self._held(name)
            stored = None if held is None or held.record is None else held.record["revision"]
            if stored != expected_revision:
                raise ConversationConflict(name)
            head = record.head_id
            origin = record.forked_from if held is None or held.record is None else None
            if head is not None and head not in {e.id for e in new_entries}:
                known = held is not None and head in held.entries
                if not known and self._locate(head, origin or (name if held else None)) is None:
                    raise ConversationConflict(name)  # a rewrite or delete released it
            cid = held.cid if held is not None else self.store.context_for_key(
                self.prefix + name, name=self.prefix + name,
                metadata={"pydantic_ai_conversation_id": name},
            )  # fmt: skip
            batch = [*(_entry_message(e) for e in new_entries), _record_message(record)]
            try:
                self.store.insert(
                    cid, batch, expected_version=None if held is None else held.version
                )
            except VersionConflictError:
                continue  # another writer: check its revision again
            if held is not None and held.record_ids:
                try:  # the superseded records (the newest one is what counts either way)
                    self.store.delete(cid, held.record_ids)
                except CtxStoreError:
                    log.warning("superseded records of %s left in place", name, exc_info=True)
            return

    async def delete_record(self, conversation_id: str, *, expected_revision: str) -> None:
        await asyncio.to_thread(self._delete, conversation_id, expected_revision)

    def _delete(self, conversation_id: str, expected_revision: str) -> None:
        held = self._held(conversation_id)
        if held is None or held.record is None or held.record["revision"] != expected_revision:
            raise ConversationConflict(conversation_id)
        tombstone = {"kind": "deleted", "forked_from": held.forked_from}
        try:
            self.store.insert(held.cid, as_record({KEY: tombstone}), expected_version=held.version)
        except VersionConflictError:
            raise ConversationConflict(conversation_id) from None
        self._collect()

    def _collect(self) -> None:
        """Delete the entries no conversation's history (its head or a branch it left)
        reaches; erase the contexts of deleted conversations left with none."""
        names = [str(c.name)[len(self.prefix) :] for c in named_contexts(self.store, self.prefix)]
        helds = {n: h for n in names if (h := self._held(n)) is not None}
        reachable: set[str] = set()
        for name, held in helds.items():
            if held.record is None:
                continue
            for tip in [held.record.get("head_id"), *held.record.get("branches", [])]:
                entry_id: str | None = tip
                at: str | None = name
                while entry_id is not None and entry_id not in reachable:
                    found = None
                    while at is not None and at in helds:
                        if entry_id in helds[at].entries:
                            found = helds[at].entries[entry_id][0]
                            break
                        at = helds[at].forked_from
                    if found is None:
                        break
                    reachable.add(entry_id)
                    entry_id = found["parent_id"]
        for name, held in helds.items():
            gone = [mid for eid, (_, mid) in held.entries.items() if eid not in reachable]
            followed = any(h.forked_from == name for h in helds.values() if h is not held)
            if held.record is None and len(gone) == len(held.entries) and not followed:
                self._erase(held.cid)
                continue
            if gone:
                self.store.delete(held.cid, gone)

    def _erase(self, cid: UUID) -> None:
        try:
            self.store.erase(cid, reason="Pydantic AI delete")
        except InvalidOperationError:  # refused (forks hold copies): hide what it holds
            seen = self.store.visible(cid).messages
            if seen:
                self.store.delete(
                    cid, [str(m.id) for m in seen if not is_record(m) or KEY in m.metadata]
                )

    async def read_entry(self, entry_id: str) -> ConversationEntry:
        def find() -> ConversationEntry:
            for c in named_contexts(self.store, self.prefix):
                held = self._held(str(c.name)[len(self.prefix) :])
                if held is not None and entry_id in held.entries:
                    return _entry(held.entries[entry_id][0])
            raise KeyError(entry_id)

        return await asyncio.to_thread(find)

    async def _history_of(
        self, record: ConversationRecord, *, limit: int | None = None
    ) -> list[ConversationEntry] | None:
        """A conversation's history, read from its own context and those it was forked from
        (the base class's reader would look each entry up on its own)."""
        try:
            return await asyncio.to_thread(
                self._history, record.conversation_id, record.head_id, limit
            )
        except LookupError:
            current = await self.read_record(record.conversation_id)
            if current is not None and current.revision == record.revision:
                raise
            return None

    async def read_history(
        self, head_id: str | None, *, limit: int | None = None
    ) -> list[ConversationEntry]:
        """The entries up to `head_id`: found from the conversation holding it, following
        the conversations it was forked from."""
        if head_id is None:
            return []

        def walk() -> list[ConversationEntry]:
            for c in named_contexts(self.store, self.prefix):
                name = str(c.name)[len(self.prefix) :]
                held = self._held(name)
                if held is not None and head_id in held.entries:
                    return self._history(name, head_id, limit)
            raise LookupError(f"entry {head_id!r} is not stored")

        return await asyncio.to_thread(walk)


__all__ = ["CtxStoreConversationStore"]
