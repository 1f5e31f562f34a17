"""A Claude Agent SDK SessionStore on ctxstore (`pip install claude-agent-sdk`).

    store = CtxStoreSessionStore(ctxstore.open("sqlite:///sessions.db"))
    # ClaudeAgentOptions(session_store=store, ...)

Each transcript (a session, or a subagent's under it: `subpath`) is a ctxstore context
found by its key. Every entry is kept exactly as appended: a user or assistant entry as a
native `anthropic` message (its `message`; the rest of the entry in the message's
metadata), so the context reads as the conversation (`to_anthropic()`); any other entry
(a title, a file snapshot, a boundary) as a record — kept in the history, never sent to a
model. An entry's `uuid` makes appending it again a no-op. A subagent's context names its
parent session's. An append is one commit: its entries, and for each assistant entry with
usage the model call it answered, marked reconstructed from the transcript (`calls` lists
them: claude_calls.py), on every surface. The session summaries are the
SDK's own fold over each transcript, done when they are listed, over what was appended
since the last listing. Deleting erases the contexts (a summary context earlier releases
kept goes too).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any
from uuid import UUID

from ctxstore.adapters.integrations.claude_calls import transcript_calls
from ctxstore.adapters.integrations.sdk_messages import as_record
from ctxstore.adapters.integrations.surface import (
    LRU,
    AwaitedStore,
    faces,
    hooks_of,
    named_contexts,
)
from ctxstore.adapters.store.contract import ContextOperations
from ctxstore.adapters.store.contract_async import AsyncContextOperations
from ctxstore.adapters.store.results import Written
from ctxstore.domain.errors import (
    ContextNotFoundError,
    CtxStoreError,
    MissingExtraError,
    VersionConflictError,
)
from ctxstore.domain.shapes import ANTHROPIC, read_native

try:
    from claude_agent_sdk._internal.session_summary import fold_session_summary
except ModuleNotFoundError as exc:  # the SDK is not installed: say which package
    raise MissingExtraError("the Claude Agent SDK session store", "claude") from exc

ENTRY = "claude_entry"  # metadata: the entry (without its message, when that is the message)
AT = "claude_message_at"  # metadata: the position of `message` among the entry's keys
AS_GIVEN = {"ctxstore": {"transcript": "as-given"}}  # the SDK owns its transcript's validity
REASON = "deleted through the Claude Agent SDK's SessionStore.delete"
RETRIES = 20  # appends raced by other writers before giving up
KNOWN = 256  # transcripts whose uuids an instance remembers


class CtxStoreSessionStore:
    """The SDK's SessionStore protocol (all methods, the optional ones included)."""

    def __init__(
        self, store: ContextOperations | AsyncContextOperations, *,
        key_prefix: str = "claude-session:",
    ) -> None:  # fmt: skip
        # An async store (ctxstore.aopen): appends awaited on the loop; the rest on threads
        # through its sync twin (the same storage and cache).
        self._faces = faces(store)
        self.store = self._faces.sync
        self._contexts: LRU[str, UUID] = LRU(KNOWN)  # a transcript's name -> its context
        self.prefix = key_prefix
        # transcript -> (version, uuids) as this store last wrote it: appends check uuids
        # without reading the transcript again (bounded: a few sessions are live at once)
        self._known: LRU[UUID, tuple[int, frozenset[str]]] = LRU(KNOWN)
        # session -> (version, last message id, summary) as last folded for its listing
        self._summaries: LRU[UUID, tuple[int, str, Any]] = LRU(KNOWN)

    # ---- the protocol -----------------------------------------------------------------

    async def append(self, key: dict[str, Any], entries: list[dict[str, Any]]) -> None:
        if not entries:
            return
        key, entries = dict(key), list(entries)
        await self._faces.write(
            lambda _: self._append(key, entries), lambda a: self._append_awaited(a, key, entries)
        )

    async def load(self, key: dict[str, Any]) -> list[dict[str, Any]] | None:
        return await asyncio.to_thread(self._load, dict(key))

    async def list_sessions(self, project_key: str) -> list[dict[str, Any]]:
        return await asyncio.to_thread(self._list_sessions, project_key)

    async def list_session_summaries(self, project_key: str) -> list[dict[str, Any]]:
        return await asyncio.to_thread(self._list_summaries, project_key)

    async def delete(self, key: dict[str, Any]) -> None:
        await asyncio.to_thread(self._delete, dict(key))

    async def list_subkeys(self, key: dict[str, Any]) -> list[str]:
        return await asyncio.to_thread(self._list_subkeys, dict(key))

    # ---- keys and contexts ----------------------------------------------------------------

    def _name(self, key: dict[str, Any], part: str = "") -> str:
        named = [key["project_key"], key["session_id"], key.get("subpath")]
        return self.prefix + part + json.dumps(named, ensure_ascii=False)

    def _id(self, key: dict[str, Any], part: str = "") -> UUID | None:
        """The transcript's context, if it was created (the store, or the service for the
        token's tenant, derives it from the key: never this process)."""
        return self.store.lookup_key(self._name(key, part))

    def _exists(self, cid: UUID | None) -> bool:
        return cid is not None and self._messages(cid, last=1, inline=False) is not None

    def _messages(
        self, cid: UUID, last: int | None = None, *, inline: bool = True
    ) -> list[dict[str, Any]] | None:
        """A transcript's messages as JSON (native payload, metadata), or None; attachments
        as their data unless not `inline`."""
        try:
            seen = self.store.visible(cid, inline=inline).messages
        except ContextNotFoundError:
            return None
        if last is not None:
            seen = seen[-last:]
        return [{"id": m.id, "native": m.native, "metadata": m.metadata} for m in seen]

    def _context(self, key: dict[str, Any], part: str = "") -> UUID:
        about = {"project_key": key["project_key"], "session_id": key["session_id"],
                 "subpath": key.get("subpath")}  # fmt: skip
        if key.get("subpath") is not None:
            parent = self._id({**key, "subpath": None})  # its session's context
            about["parent"] = None if parent is None else str(parent)
        name = self._name(key, part)
        return self.store.context_for_key(
            name, name=name, metadata={"claude_session": about, **AS_GIVEN}
        )

    def _keys_of(self, project_key: str, part: str = "") -> list[tuple[UUID, list[Any]]]:
        """(context, [project, session, subpath]) of every transcript of a project."""
        start = self.prefix + part + json.dumps([project_key], ensure_ascii=False)[:-1] + ","
        found = []
        for c in named_contexts(self.store, start):
            named = json.loads((c.name or "")[len(self.prefix + part) :])
            if named[0] == project_key:
                found.append((c.context_id, named))
        return found

    def _uuids(self, cid: UUID) -> tuple[int, frozenset[str]]:
        """The transcript's version and its entries' uuids: as this store last wrote them
        (an insert at that version fails if another writer came between), else read."""
        known = self._known.get(cid)
        if known is not None:
            return known
        try:
            seen = self.store.visible(cid)  # (the uuids only: no attachments' data)
        except ContextNotFoundError:
            return 0, frozenset()
        held = [{"native": m.native, "metadata": m.metadata} for m in seen.messages]
        found = (seen.version, frozenset(u for m in held if (u := _entry(m).get("uuid"))))
        self._known[cid] = found
        return found

    # ---- the work, awaited (an async store) --------------------------------------------------

    async def _context_of(self, key: dict[str, Any], part: str = "") -> UUID:
        """A transcript's context, found (or made) once on a thread, then remembered."""
        name = self._name(key, part)
        found = self._contexts.get(name)
        if found is None:
            found = self._contexts[name] = await asyncio.to_thread(self._context, key, part)
        return found

    async def _append_awaited(
        self, store: AwaitedStore, key: dict[str, Any], entries: list[dict[str, Any]]
    ) -> None:
        try:
            await self._append_to(store, key, entries)
        except ContextNotFoundError:  # deleted by another instance since it was remembered
            self._contexts.clear()
            self._known.clear()
            await self._append_to(store, key, entries)

    async def _append_to(
        self, store: AwaitedStore, key: dict[str, Any], entries: list[dict[str, Any]]
    ) -> None:
        cid = await self._context_of(key)
        confirmed = False  # the uuids were read from the transcript, not remembered
        for _ in range(RETRIES):
            known = self._known.get(cid)
            if known is not None and not confirmed and _repeats(entries, known[1]):
                known = None  # as _append
            if known is None:
                confirmed = True
                seen_now = await store.visible(cid)
                held = [{"native": m.native, "metadata": m.metadata} for m in seen_now.messages]
                known = (seen_now.version,
                         frozenset(u for m in held if (u := _entry(m).get("uuid"))))  # fmt: skip
            version, seen = known
            fresh = [e for e in _unseen(entries, seen)]
            if not fresh:
                return
            try:
                calls = transcript_calls(fresh)
                written = await store.insert(
                    cid, [_message(e) for e in fresh], expected_version=version,
                    calls=calls or None,
                )  # fmt: skip
            except VersionConflictError:
                self._known.pop(cid, None)
                continue
            uuids = {u for e in fresh if (u := e.get("uuid")) is not None}
            self._known[cid] = (written.version, seen | uuids)
            break
        else:
            raise VersionConflictError(f"transcript {self._name(key)} kept changing")

    # ---- the work, on a thread ----------------------------------------------------------------

    def _append(self, key: dict[str, Any], entries: list[dict[str, Any]]) -> None:
        cid = self._context(key)
        confirmed = False  # the uuids were read from the transcript, not remembered
        for _ in range(RETRIES):
            known = self._known.get(cid)
            if known is None or (not confirmed and _repeats(entries, known[1])):
                # Entries taken as stored on what this store remembers are checked against
                # the transcript: erased and written again elsewhere up to the remembered
                # version, it may not hold them (the insert's version check cannot tell).
                self._known.pop(cid, None)
                confirmed = True
            version, seen = self._uuids(cid)
            fresh = _unseen(entries, seen)
            seen = seen | {u for e in fresh if (u := e.get("uuid")) is not None}
            if not fresh:
                return
            try:  # only if nobody wrote since the uuids were read: else read them again
                written = self._insert(cid, fresh, version)
            except VersionConflictError:
                self._known.pop(cid, None)
                continue
            self._known[cid] = (written.version, seen)
            break
        else:
            raise VersionConflictError(f"transcript {self._name(key)} kept changing")

    def _insert(self, cid: UUID, fresh: list[dict[str, Any]], version: int) -> Written:
        """One commit: the entries, and the calls of the replies among them
        (claude_calls.py), on every surface."""
        calls = transcript_calls(fresh)
        return self.store.insert(
            cid, [_message(e) for e in fresh], expected_version=version, calls=calls or None
        )

    def _load(self, key: dict[str, Any]) -> list[dict[str, Any]] | None:
        """The entries, each built once from its stored JSON: read as stored messages
        where the surface offers them (the store, its async twin, the sharded store), so
        neither validated messages nor the visible context are made; over HTTP, the
        visible context."""
        cid = self._id(key)
        if cid is None:
            return None
        hooks = hooks_of(self.store)
        if hooks is None:
            held = self._messages(cid)
            return None if held is None else [_entry(m) for m in held]
        try:
            stored: list[dict[str, Any]] = hooks.visible_messages(cid, inline=True)
        except ContextNotFoundError:
            return None
        entries = []
        stored.reverse()
        while stored:  # each stored copy let go as its entry is made of it
            entries.append(_entry(stored.pop()))
        return entries

    def _list_sessions(self, project_key: str) -> list[dict[str, Any]]:
        return [
            {"session_id": named[1], "mtime": _mtime(self.store, cid)}
            for cid, named in self._keys_of(project_key)
            if named[2] is None
        ]

    def _list_summaries(self, project_key: str) -> list[dict[str, Any]]:
        found = []
        for cid, named in self._keys_of(project_key):
            if named[2] is None:  # subagents' transcripts are not summarized
                key = {"project_key": named[0], "session_id": named[1]}
                summary = self._summary(cid, key)
                if summary is not None:
                    found.append(summary)
        return found

    def _summary(self, cid: UUID, key: dict[str, Any]) -> dict[str, Any] | None:
        """The session's summary: the SDK's fold over its transcript, folded when listed
        rather than on every append (so an append is one commit), and only over the
        entries appended since this instance last folded it. Its mtime is the transcript's
        last write, the clock list_sessions reads."""
        try:
            seen = self.store.visible(cid, inline=False)
        except ContextNotFoundError:
            return None
        if not seen.messages:
            return None
        version, last, summary = self._summaries.get(cid) or (0, "", None)
        ids = [m.id for m in seen.messages]
        if version != seen.version or ids[-1] != last:  # (made again: the version may match)
            # Fold on from the last message folded; a transcript without it (erased and
            # made again by another instance) is folded from its start.
            count = ids.index(last) + 1 if last in ids else 0
            summary = None if count == 0 else summary
            entries = [_entry({"native": m.native, "metadata": m.metadata})
                       for m in seen.messages[count:]]  # fmt: skip
            summary = dict(fold_session_summary(summary, key, entries))  # type: ignore[arg-type]
            summary["mtime"] = int(seen.modified_at.timestamp() * 1000)
            self._summaries[cid] = (seen.version, ids[-1] or "", summary)
        return dict(summary or {})

    def _list_subkeys(self, key: dict[str, Any]) -> list[str]:
        return [
            named[2]
            for _, named in self._keys_of(key["project_key"])
            if named[1] == key["session_id"] and named[2] is not None
        ]

    def _delete(self, key: dict[str, Any]) -> None:
        gone = [self._id(key)]
        if key.get("subpath") is None:  # a session goes with its subagents and summary
            gone += [self._id({**key, "subpath": s}) for s in self._list_subkeys(key)]
            gone.append(self._id(key, "summary:"))
        for cid in gone:
            if cid is None:
                continue
            self._known.pop(cid, None)
            self._summaries.pop(cid, None)
            for name in [n for n, c in self._contexts.items() if c == cid]:
                self._contexts.pop(name, None)
            if self._exists(cid):
                self.store.erase(cid, reason=REASON, with_forks=True)


def _message(entry: dict[str, Any]) -> dict[str, Any]:
    """The ctxstore message keeping one entry exactly."""
    message = entry.get("message")
    if entry.get("type") in ("user", "assistant") and isinstance(message, dict):
        try:
            seen = read_native(message, ANTHROPIC)
        except CtxStoreError:
            seen = None
        if seen is not None:
            rest = {k: v for k, v in entry.items() if k != "message"}
            at = list(entry).index("message")
            return {"role": seen.role, "format": ANTHROPIC, "native": message,
                    "metadata": {ENTRY: rest, AT: at}}  # fmt: skip
    return as_record({ENTRY: entry})


def _entry(message: dict[str, Any]) -> dict[str, Any]:
    """The entry a ctxstore message keeps, as it was appended (its keys in their order)."""
    metadata = message.get("metadata") or {}
    entry = metadata.get(ENTRY) or {}
    if message.get("native") is None or AT not in metadata:
        return dict(entry)
    items = list(entry.items())
    items.insert(metadata[AT], ("message", message["native"]))
    return dict(items)


def _mtime(store: ContextOperations, cid: UUID) -> int:
    """The transcript's last write, in epoch milliseconds."""
    return int(store.visible(cid).modified_at.timestamp() * 1000)


def _repeats(entries: list[dict[str, Any]], seen: frozenset[str]) -> bool:
    """Whether any entry's uuid is among those taken as stored (a retry's, or stale)."""
    return any(e.get("uuid") in seen for e in entries)


def _unseen(entries: list[dict[str, Any]], seen: frozenset[str]) -> list[dict[str, Any]]:
    """The entries not appended before (a retry's are a no-op), each uuid once."""
    fresh, uuids = [], set(seen)
    for e in entries:
        uuid = e.get("uuid")
        if uuid is not None and uuid in uuids:
            continue
        if uuid is not None:
            uuids.add(uuid)
        fresh.append(e)
    return fresh
