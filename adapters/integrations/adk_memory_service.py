"""A Google ADK memory service on ctxstore's search (`pip install 'ctxstore[adk]'`).

    memory = CtxStoreMemoryService(ctxstore.open("sqlite:///adk.db"))
    runner = Runner(agent=agent, app_name="weather", session_service=sessions,
                    memory_service=memory)

A user's memories are one ctxstore context per (app, user), found by the key
`adk:memory:["<app>","<user>"]` (the names JSON-encoded: no app or user name can forge
another pair's key, nor any of the session service's `adk:session:`, `adk:user:` and
`adk:app:` keys). Each memory is one Gemini message — the event's or the entry's Content
as its payload, what ADK's MemoryEntry carries besides (id, author, time, custom metadata)
in its metadata — so search indexes it like any message, and the context reads as what
the user's agent remembers. The context keeps its messages as given (a function call's
memory stands without its response).

Adding follows ADK's InMemoryMemoryService: only events with content are memories, each
by its event id, once — adding a session again (ADK adds it after every turn) or an event
already kept adds nothing, and a deleted memory is never added back. `add_memory` keeps
explicit entries (an entry without an id gets a new one).

Searching: ctxstore's query needs every word; ADK's memories match when ANY word of the
query does, since agents ask questions ("what is my favorite color" must find "My favorite
color is blue"). So each distinct word of the query (its first MAX_WORDS) is searched on
its own as a phrase, in that user's memory context only — case- and accent-insensitive,
Chinese, Japanese and Korean by substrings of two or more characters — and a memory ranks
by how many of the words it holds, ties in the order the memories were added, the best
`max_results` returned (ten, as ADK's in-memory service). A word holds for a memory's
text, its function calls and their results (what ctxstore searches); each word reads its
best PER_WORD matches, so a word nearly every memory holds ("is") counts for those only.

`delete_memory` deletes as ctxstore deletes: the memory is replaced by a record naming its
id, so it is never found, returned or added again, while the context's history keeps what
it said (the audit trail). Forgetting a user entirely is erasing the context:
`store.erase(store.lookup_key(memory.context_key(app, user)), reason=...)`.
"""

from __future__ import annotations

import asyncio
import json
import re
import unicodedata
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ctxstore.domain.errors import MissingExtraError

try:
    from google.adk.events.event import Event
    from google.adk.memory import _utils
    from google.adk.memory.base_memory_service import BaseMemoryService, SearchMemoryResponse
    from google.adk.memory.memory_entry import MemoryEntry
    from google.adk.sessions.session import Session
    from google.genai import types
except ModuleNotFoundError as exc:  # the extra is not installed: say which
    raise MissingExtraError("the Google ADK memory service", "adk") from exc

from ctxstore.adapters.integrations.sdk_messages import as_record
from ctxstore.adapters.integrations.surface import faces
from ctxstore.adapters.store.contract import ContextOperations
from ctxstore.adapters.store.contract_async import AsyncContextOperations
from ctxstore.adapters.threads.settled import settled
from ctxstore.domain.context import JSON
from ctxstore.domain.errors import (
    ContextNotFoundError,
    InvalidOperationError,
    VersionConflictError,
)
from ctxstore.domain.gemini import GEMINI
from ctxstore.domain.limits import check_int
from ctxstore.domain.messages import Message
from ctxstore.domain.search.query import MAX_QUERY
from ctxstore.domain.search.text import words
from ctxstore.domain.shapes import read_native

MEMORY = "adk_memory"  # metadata of a memory: what a MemoryEntry holds besides its Content
DELETED = "adk_memory_deleted"  # metadata of the record a deleted memory leaves: its id
AS_GIVEN = {"ctxstore": {"transcript": "as-given"}}  # memories are no conversation
MAX_RESULTS = 10  # memories a search returns, as ADK's InMemoryMemoryService
MAX_WORDS = 32  # words of one query searched
PER_WORD = 100  # matches read per word: one page of a search
RETRIES = 20  # rounds of read-then-write when other writers change the context first
QUERY_WORD = re.compile(r"\w+")  # a query's words, as ADK's in-memory service splits them


class CtxStoreMemoryService(BaseMemoryService):
    """ADK's BaseMemoryService (adding sessions, events and entries; searching; deleting)
    over a ctxstore store: the store, an async store (its sync twin, on threads) or a
    tenant's HTTP client."""

    def __init__(
        self, store: ContextOperations | AsyncContextOperations, *, key_prefix: str = "adk:",
        max_results: int = MAX_RESULTS,
    ) -> None:  # fmt: skip
        self.store = faces(store).sync
        self.prefix = key_prefix
        self.max_results = check_int(max_results, "max_results", low=1, high=PER_WORD)

    def context_key(self, app_name: str, user_id: str) -> str:
        """The key of a user's memory context (`lookup_key` finds it; a read never makes it)."""
        return f"{self.prefix}memory:" + json.dumps(
            [_name(app_name, "app_name"), _name(user_id, "user_id")], ensure_ascii=False
        )

    # ---- the protocol -------------------------------------------------------------------

    async def add_session_to_memory(self, session: Session) -> None:
        if not isinstance(session, Session):
            raise InvalidOperationError(f"not an ADK Session: {type(session).__name__}")
        kept = [_from_event(e, session.id, {}) for e in _with_content(session.events)]
        await self._add(self.context_key(session.app_name, session.user_id), kept)

    async def add_events_to_memory(
        self, *, app_name: str, user_id: str, events: Sequence[Event],
        session_id: str | None = None, custom_metadata: Mapping[str, object] | None = None,
    ) -> None:  # fmt: skip
        key = self.context_key(app_name, user_id)
        given = _plain(custom_metadata, "custom_metadata")
        kept = [_from_event(e, session_id, given) for e in _with_content(_each(events, Event))]
        await self._add(key, kept)

    async def add_memory(
        self, *, app_name: str, user_id: str, memories: Sequence[MemoryEntry],
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:  # fmt: skip
        key = self.context_key(app_name, user_id)
        given = _plain(custom_metadata, "custom_metadata")
        await self._add(key, [_from_entry(m, given) for m in _each(memories, MemoryEntry)])

    async def search_memory(
        self, *, app_name: str, user_id: str, query: str
    ) -> SearchMemoryResponse:
        key = self.context_key(app_name, user_id)
        asked = _query_words(query)
        if not asked:
            return SearchMemoryResponse()
        return await asyncio.to_thread(self._search, key, asked)

    async def delete_memory(
        self, *, app_name: str, user_id: str, memory_id: str | None = None
    ) -> None:
        key = self.context_key(app_name, user_id)
        if memory_id is None or memory_id == "":  # ADK's in-memory service: nothing to do
            return
        await settled(self._delete, key, _name(memory_id, "memory_id"))

    # ---- the work, on a thread ------------------------------------------------------------

    async def _add(self, key: str, memories: list[JSON]) -> None:
        if memories:
            await settled(self._store, key, memories)

    def _store(self, key: str, memories: list[JSON]) -> None:
        """Inserts the memories whose ids the context holds neither as a memory nor as a
        deleted one: one insert at the version read, read again when another writer won."""
        cid = self.store.context_for_key(key, metadata=AS_GIVEN)
        for _ in range(RETRIES):
            seen = self.store.visible(cid)
            held = set(_ids(seen.messages))
            new = list({_id(m): m for m in memories if _id(m) not in held}.values())
            if not new:
                return
            try:
                self.store.insert(cid, new, expected_version=seen.version)
                return
            except VersionConflictError:
                continue  # another writer added first: add what it did not
        raise VersionConflictError(f"{key}: memories kept changing under {RETRIES} attempts")

    def _search(self, key: str, asked: list[str]) -> SearchMemoryResponse:
        cid = self.store.lookup_key(key)
        if cid is None:
            return SearchMemoryResponse()
        matched: Counter[str] = Counter()
        for word in asked:  # any word matches (ADK's semantics): each searched on its own
            page = self.store.search(f'"{word}"', context_ids=[cid], limit=PER_WORD)
            matched.update({hit.message_id for hit in page.hits})
        if not matched:
            return SearchMemoryResponse()
        try:
            shown = self.store.visible(cid, inline=True).messages
        except ContextNotFoundError:  # erased since it was searched
            return SearchMemoryResponse()
        found = [m for m in shown if m.id in matched and MEMORY in m.metadata]
        found.sort(key=lambda m: -matched[m.id or ""])  # stable: ties in the order added
        return SearchMemoryResponse(memories=[_entry(m) for m in found[: self.max_results]])

    def _delete(self, key: str, memory_id: str) -> None:
        cid = self.store.lookup_key(key)
        if cid is None:
            return
        for _ in range(RETRIES):
            try:
                seen = self.store.visible(cid)
            except ContextNotFoundError:  # erased: nothing is left to delete
                return
            held = [m for m in seen.messages if _kept(m, MEMORY).get("id") == memory_id]
            if not held:
                return
            gone = as_record({DELETED: memory_id})  # in its place: never added again
            try:
                self.store.replace(cid, held[0].id or "", gone, expected_version=seen.version)
                return
            except VersionConflictError:
                continue
        raise VersionConflictError(f"{key}: memories kept changing under {RETRIES} attempts")


# ---- memories as messages -------------------------------------------------------------------


def _from_event(event: Event, session_id: str | None, given: JSON) -> JSON:
    said = {"id": event.id, "author": event.author, "time": event.timestamp}
    if session_id is not None:
        said["session_id"] = _name(session_id, "session_id")
    return _memory(event.content, {**said, "custom_metadata": given})


def _from_entry(entry: MemoryEntry, given: JSON) -> JSON:
    if not entry.content.parts:
        raise InvalidOperationError("a memory needs content with at least one part")
    own = _plain(entry.custom_metadata, "a memory's custom_metadata")
    said = {"id": entry.id or uuid.uuid4().hex, "author": entry.author,
            "timestamp": entry.timestamp, "custom_metadata": {**given, **own}}  # fmt: skip
    return _memory(entry.content, said)


def _memory(content: types.Content | None, said: JSON) -> JSON:
    """The ctxstore message keeping one memory: its Content as a Gemini message."""
    native = json.loads(content.model_dump_json(exclude_none=True)) if content else {}
    role = read_native(native, GEMINI).role
    return {"format": GEMINI, "role": role, "native": native, "metadata": {MEMORY: said}}


def _entry(m: Message) -> MemoryEntry:
    """The MemoryEntry a memory's message keeps (as ADK's in-memory service builds it)."""
    said = _kept(m, MEMORY)
    at = said.get("time")
    return MemoryEntry(
        id=said["id"], content=types.Content.model_validate_json(json.dumps(m.native)),
        author=said.get("author"), custom_metadata=dict(said.get("custom_metadata") or {}),
        timestamp=_utils.format_timestamp(at) if at is not None else said.get("timestamp"),
    )  # fmt: skip


def _ids(messages: Iterable[Message]) -> Iterable[str]:
    """The memory ids a context holds: its memories' and its deleted ones'."""
    for m in messages:
        if MEMORY in m.metadata:
            yield str(_kept(m, MEMORY)["id"])
        elif DELETED in m.metadata:
            yield str(m.metadata[DELETED])


def _id(memory: JSON) -> str:
    return str(memory["metadata"][MEMORY]["id"])


def _kept(m: Message, key: str) -> dict[str, Any]:
    kept = m.metadata.get(key)
    return kept if isinstance(kept, dict) else {}


def _with_content(events: Iterable[Event]) -> list[Event]:
    """ADK's rule: an event is a memory when it has content with parts."""
    return [e for e in events if e.content and e.content.parts]


# ---- what callers give -------------------------------------------------------------------


def _name(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise InvalidOperationError(f"{what} must be a string, got {type(value).__name__}")
    return value


def _each(given: object, kind: type[Any]) -> list[Any]:
    if isinstance(given, str | bytes | Mapping) or not isinstance(given, Iterable):
        raise InvalidOperationError(f"expected a sequence of {kind.__name__}s, got {given!r:.60}")
    items = list(given)
    wrong = [type(i).__name__ for i in items if not isinstance(i, kind)]
    if wrong:
        raise InvalidOperationError(f"expected {kind.__name__}s, got a {wrong[0]}")
    return items


def _plain(given: Mapping[str, object] | None, what: str) -> JSON:
    """Metadata kept with a memory: a JSON object."""
    if given is None:
        return {}
    try:
        plain: JSON = json.loads(json.dumps(dict(given), ensure_ascii=False))
    except (TypeError, ValueError) as exc:
        raise InvalidOperationError(f"{what} must be a JSON object: {exc}") from None
    return plain


def _query_words(query: object) -> list[str]:
    """The distinct words of a query (ADK's split), each one ctxstore can search for."""
    text = _name(query, "query")
    found = dict.fromkeys(w.lower() for w in QUERY_WORD.findall(unicodedata.normalize("NFC", text)))
    usable = [w for w in found if len(w) <= MAX_QUERY - 2 and words(w)]  # (quoted: +2)
    return usable[:MAX_WORDS]


__all__ = ["CtxStoreMemoryService"]
