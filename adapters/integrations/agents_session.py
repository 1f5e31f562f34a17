"""An OpenAI Agents SDK session stored in ctxstore (extra `ctxstore[agents]`).

    session = CtxStoreSession("user-42", ctxstore.open())       # or a CtxStoreClient
    await Runner.run(agent, "Hello", session=session)

Each SDK item becomes one ctxstore message in the Responses shape, exactly as given (what
`get_items` returns, and what `to_responses()` sends back to the model): tool outputs stay
`function_call_output` items and reasoning stays `reasoning`. The session's context holds
the transcript as the SDK gives it (created with {"ctxstore": {"transcript": "as-given"}}:
the SDK owns its history's validity). An item the Responses shape does not know is kept as
sessions made before this kept every item: a chat message holding it in its metadata.
Sessions written that way read as before, and keep being written that way. The session's
history is an audited, replayable ctxstore context found by the session id.

When the SDK's compaction wrapper (OpenAIResponsesCompactionSession) replaces the history,
`_atomic_replace_items` records it as one compress event (the output items in one summary
message) instead of a delete of everything followed by re-inserts. Its automatic compaction
reads a bounded tail with `_get_compaction_snapshot` and replaces only that suffix, again as
one compress event, refused (False) when the session changed since the read: so a session
whose runs load only the latest items (`SessionSettings(limit=...)`) is compacted as the
SDK's own SQLite and SQLAlchemy sessions are.

Writes settle before a cancellation reaches the caller, as in the SDK's own sessions: a
cancelled add has either been stored or not, and the caller is told only once it is known.

A streamed run is stored as it streams through `streamed()` (docs/how-to/streaming.md): its output
items visible while they stream, finished in place by the SDK's own items, abandoned (kept)
when the run stops half way; `get_items` gives an unfinished item back repaired.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from uuid import UUID

from ctxstore.domain.errors import MissingExtraError

try:
    from agents.items import TResponseInputItem
    from agents.memory.session import SessionABC
    from agents.memory.session_settings import (
        SessionSettings,
        coerce_session_settings,
        resolve_session_limit,
    )
except ModuleNotFoundError as exc:  # the extra is not installed: say which
    raise MissingExtraError("the OpenAI Agents SDK session", "agents") from exc

from ctxstore.adapters.capture.agents import bind_session
from ctxstore.adapters.integrations.agents_items import (
    held_items,
    item_message,
    native_message,
    summary_message,
)
from ctxstore.adapters.integrations.surface import faces, hooks_of
from ctxstore.adapters.store.contract import ContextOperations, ReplyStream, StreamPolicy
from ctxstore.adapters.store.contract_async import AsyncContextOperations
from ctxstore.adapters.store.results import VisibleContext
from ctxstore.adapters.threads.settled import settled, settled_await
from ctxstore.domain.context import JSON
from ctxstore.domain.errors import (
    CtxStoreError,
    InvalidOperationError,
    UnknownMessageError,
    VersionConflictError,
)
from ctxstore.domain.messages import Message
from ctxstore.domain.plain import as_plain
from ctxstore.domain.shapes import RESPONSES
from ctxstore.domain.stream_repair import repair
from ctxstore.domain.streaming import INCOMPLETE

AS_GIVEN = {"ctxstore": {"transcript": "as-given"}}  # the SDK owns its history's validity

ATTEMPTS = 50
T = TypeVar("T")


# What the session needs: the one contract, which ContextStore and CtxStoreClient satisfy.
ContextBackend = ContextOperations


@dataclass(frozen=True)
class CompactionSnapshot:
    """What the SDK's automatic compaction reads (the same fields as its own backends'
    snapshot): the newest items, whether they are all of them, and how to replace a suffix
    of them atomically."""

    items: list[Any]
    complete: bool
    replace_suffix: Callable[[int, list[Any]], Awaitable[bool]]


@dataclass(frozen=True)
class _Tail:
    """The messages holding a snapshot's items, as read at `version`."""

    version: int
    ids: list[str]  # every visible message, oldest first
    held: list[list[Any]]  # the items each holds
    first: int  # index in `ids` of the message holding the snapshot's first item
    skip: int  # that message's items before the snapshot's first


class CtxStoreSession(SessionABC):
    """The Agents SDK session protocol on a ctxstore context named by the session id."""

    def __init__(
        self,
        session_id: str,
        store: ContextBackend | AsyncContextOperations,
        *,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        key_prefix: str = "agents-session:",
        capture: bool = True,
    ) -> None:
        self.session_id = session_id
        # The model calls of a run on this session are recorded into its context
        # (adapters/capture/agents.py); `capture=False` leaves them out.
        self.capture = capture
        # An async store (ctxstore.aopen): adds and reads awaited on the loop; the rest on
        # threads through its sync twin (the same storage and cache).
        self.store, self._async = faces(store)
        # As the SDK's own sessions: empty settings (no limit) unless given.
        self.session_settings = (
            coerce_session_settings(session_settings)
            if session_settings is not None
            else SessionSettings()
        )
        self._key = key_prefix + session_id
        self._context: UUID | None = None
        self._native: bool | None = None  # whether this session's context holds native items
        self._streams: dict[str, ReplyStream] = {}  # output items streaming, by item id
        self._added: deque[str] = deque(maxlen=1000)  # ids of items the SDK added lately
        self._streaming = threading.Lock()  # guards both: the SDK's adds run on threads

    @property
    def context_id(self) -> UUID:
        """The ctxstore context holding this session (created on first use)."""
        if self._context is None:
            self._context = self.store.context_for_key(
                self._key, name=f"agents session {self.session_id}",
                metadata={"agents_session_id": self.session_id, **AS_GIVEN},
            )  # fmt: skip
        return self._context

    @property
    def holds_native(self) -> bool:
        """Whether the session's context was made to hold items natively (sessions made
        before that keep their items the older way, and are written so)."""
        if self._native is None:
            created = self.store.history(self.context_id, types=["create"])
            metadata = created[0].details.get("metadata") or {} if created else {}
            self._native = metadata.get("ctxstore") == AS_GIVEN["ctxstore"]
        return self._native

    def _message(self, item: Any) -> JSON:
        native = native_message(item) if self.holds_native else None
        return native if native is not None else item_message(item)

    # ---- the protocol ---------------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The history in order; with a limit, the latest `limit` items (as SQLiteSession)."""
        wanted = resolve_session_limit(limit, self.session_settings)
        if wanted is not None and wanted == 0:
            return []
        newest = None if wanted is None or wanted < 0 else wanted
        if self._async is not None:
            if self._context is None:
                await settled(lambda: self.context_id)  # (the first use reads the store)
            items = self._items_in(
                await self._async.visible_messages(self.context_id, last=newest, inline=True),
                newest,
            )
            if items is None:  # messages without items among the newest: read them all
                items = self._items_in(
                    await self._async.visible_messages(self.context_id, inline=True), None
                )
        else:
            items = await asyncio.to_thread(self._items, newest)
        assert items is not None
        if self.capture:  # the run reading its items now makes its model calls
            bind_session(self.store, self.context_id)
        if wanted is None or wanted < 0:
            return items
        return items[-wanted:]

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append items; concurrent adds are retried on conflict, none is lost."""
        if not items:
            return
        if self._async is None or self._streams:
            await settled(self._add, list(items))
            return
        if self._native is None:
            await settled(lambda: self.holds_native)  # (the first use reads the store)
        messages = [self._message(i) for i in items]
        await settled_await(self._async.insert(self.context_id, messages))

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove and return the newest item, or None when the session is empty."""
        return await settled(self._pop)

    async def clear_session(self) -> None:
        """Hide every item (one delete event; the history stays in the audit)."""
        await settled(self._clear)

    async def _atomic_replace_items(self, items: list[TResponseInputItem]) -> bool:
        """The compaction wrapper's replacement of the whole history: one compress event.
        False (the wrapper then clears and adds, through the subclass) for a subclass that
        hooks the item methods: one write here would bypass its hooks."""
        if self._hooked():
            return False
        return await settled(self._replace_all, list(items))

    def _hooked(self) -> bool:
        """Whether a subclass overrides how items are added, read or cleared."""
        return any(
            getattr(type(self), name) is not getattr(CtxStoreSession, name)
            for name in ("add_items", "get_items", "clear_session", "pop_item")
        )

    async def _get_compaction_snapshot(
        self, limit: int, *, prune_prefix: Callable[[Any], bool] | None = None
    ) -> CompactionSnapshot | None:
        """The newest `limit` items for the compaction wrapper, with a replacement of any
        suffix of them that fails (False) if the session changed since this read.
        `prune_prefix` (the SDK's encrypted session: expired items) also hides the oldest
        messages whose items all satisfy it. None for a subclass that hooks the item
        methods, which this would bypass (as the SDK's backends do)."""
        if self._hooked() or limit < 1:
            return None
        tail = await asyncio.to_thread(self._tail, limit)
        items = [i for held in tail.held[tail.first :] for i in held][tail.skip :]
        complete = tail.skip == 0 and not any(tail.held[: tail.first])

        async def replace_suffix(start: int, output: list[Any]) -> bool:
            if not 0 <= start < len(items):
                return False
            return await settled(self._replace_suffix, tail, start, list(output), prune_prefix)

        return CompactionSnapshot(items, complete, replace_suffix)

    # ---- streamed runs ------------------------------------------------------------------

    async def streamed(
        self, events: AsyncIterator[Any], *, policy: StreamPolicy | None = None
    ) -> AsyncIterator[Any]:
        """A streamed run's events, passed through unchanged, with each output item stored
        in the session's context as it streams:

            result = Runner.run_streamed(agent, "Hello", session=session)
            async for event in session.streamed(result.stream_events()):
                ...

        An item is visible (marked incomplete) from its first event; when the SDK adds the
        finished items to the session, each streamed one is finished with the SDK's item
        instead of written again. A run that raises or is cancelled (a client gone, a user's
        stop) leaves its items as they streamed, abandoned: what arrived stays in the
        session, sent back repaired (docs/how-to/streaming.md)."""
        try:
            async for event in events:
                data = getattr(event, "data", None)
                if getattr(event, "type", None) == "raw_response_event" and data is not None:
                    await self._stream_event(data, policy)
                yield event
        except BaseException as exc:
            reason = f"the run stopped: {type(exc).__name__}"
            await settled(self._stop_streams, reason, True)
            raise
        await settled(self._stop_streams, "the SDK did not add it to the session", False)

    async def _stream_event(self, data: Any, policy: StreamPolicy | None) -> None:
        kind = getattr(data, "type", None)
        if kind == "response.output_item.added" and self.holds_native:
            item = as_plain(data.item)
            if isinstance(item, dict) and isinstance(item.get("id"), str):
                await settled(self._begin_item, item, policy)
            return
        reply = self._streams.get(str(getattr(data, "item_id", "")))
        if reply is None or reply.closed:
            return
        # The SDK may add (and so finish) the item while its events are still read here.
        with contextlib.suppress(InvalidOperationError):
            if reply.keep(data):
                await settled(reply.flush)

    def _begin_item(self, item: JSON, policy: StreamPolicy | None) -> None:
        """Begin an output item as it starts streaming, unless the SDK added it already (its
        run runs ahead of the events a caller reads)."""
        with self._streaming:
            if item["id"] in self._added:
                return
            reply = self.store.stream(self.context_id, item, format=RESPONSES, policy=policy)
            self._streams[item["id"]] = reply

    def _stop_streams(self, reason: str, keep: bool) -> None:
        """Close what still streams: abandoned as it stands (`keep`), or hidden."""
        with self._streaming:
            open_ = [r for r in self._streams.values() if not r.closed]
            self._streams.clear()
        for reply in open_:
            with contextlib.suppress(CtxStoreError):  # (finished meanwhile, or rolled back)
                reply.abandon(reason, keep=keep)

    # ---- the work, on a thread ----------------------------------------------------------------

    def _add(self, items: list[Any]) -> None:
        # The context is found (or made) here too: on first use that is a query, which
        # would otherwise run on the event loop.
        messages = [self._message(i) for i in items]
        with self._streaming:
            rest = self._finish_streamed(items, messages) if self._streams else messages
            self._added.extend(i["id"] for i in items if isinstance(i, dict) and "id" in i)
        if rest:
            self.store.insert(self.context_id, rest, expected_version=None)

    def _finish_streamed(self, items: list[Any], messages: list[JSON]) -> list[JSON]:
        """Finish the streamed items among `items` with the SDK's own (in place, where they
        streamed); returns the messages still to insert. Streamed items must come first and
        in order; otherwise the streamed copies are hidden and every item is inserted."""
        ids = [i.get("id") if isinstance(i, dict) else None for i in items]
        hits = [n for n, i in enumerate(ids) if isinstance(i, str) and i in self._streams]
        if not hits:
            return messages
        if hits != list(range(len(hits))):
            self._stop_streams("the SDK added its items in another order", False)
            return messages
        for n in hits:
            reply = self._streams.pop(str(ids[n]))
            reply.finish(messages[n])
        return messages[len(hits) :]

    def _items(self, newest: int | None = None) -> list[Any]:
        """Every item, or at least the newest `newest` (each message holds one or more)."""
        hooks = hooks_of(self.store)
        if hooks is None:  # over HTTP: the visible context
            return self._items_of(self.store.visible(self.context_id, inline=True))
        found = self._items_in(
            hooks.visible_messages(self.context_id, last=newest, inline=True), newest
        )
        return self._items() if found is None else found

    @staticmethod
    def _items_in(messages: list[JSON], newest: int | None) -> list[Any] | None:
        """The items the newest messages hold; None when they hold fewer than `newest` items
        and older messages may hold more (read them all)."""
        if any(INCOMPLETE in (m.get("metadata") or {}) for m in messages):
            # A reply that did not finish streaming is given back repaired (docs/how-to/streaming.md).
            messages = [
                m.stored() for m in repair([Message.model_validate(m) for m in messages])[0]
            ]
        items = [
            i
            for m in messages
            for i in held_items(m.get("metadata") or {}, m.get("content"), m.get("native"))
        ]
        if newest is not None and len(items) < newest and len(messages) == newest:
            return None
        return items

    def _pop(self) -> Any:
        for _ in range(ATTEMPTS):  # a racing writer moved the tail: read it again
            seen = self.store.visible(self.context_id, inline=True)
            if not seen.messages:
                return None
            last = seen.messages[-1]
            held = held_items(last.metadata, last.content, last.native)
            assert last.id is not None
            try:
                if len(held) > 1:  # a compaction summary: keep the items before the last
                    rest = summary_message(held[:-1])
                    self.store.replace(
                        self.context_id, last.id, rest, expected_version=seen.version
                    )
                else:
                    self.store.delete(self.context_id, [last.id], expected_version=seen.version)
            except (VersionConflictError, UnknownMessageError):
                continue
            return held[-1] if held else None
        raise VersionConflictError(f"session {self.session_id}: its tail kept changing")

    def _clear(self) -> None:
        for _ in range(ATTEMPTS):
            seen = self.store.visible(self.context_id, inline=True)
            ids = [m.id for m in seen.messages if m.id is not None]
            if not ids:
                return
            try:
                self.store.delete(self.context_id, ids, expected_version=seen.version)
                return
            except (VersionConflictError, UnknownMessageError):
                continue
        raise VersionConflictError(f"session {self.session_id}: kept changing while cleared")

    def _replace_all(self, items: list[Any]) -> bool:
        # Like the SDK's own Redis session, the whole current history is replaced; a write
        # that raced in between is retried on the fresh history rather than cleared and
        # re-added around.
        for _ in range(ATTEMPTS):
            seen = self.store.visible(self.context_id, inline=True)
            ids = [m.id for m in seen.messages if m.id is not None]
            try:
                if not ids:
                    if items:
                        self.store.insert(
                            self.context_id, [summary_message(items)],
                            expected_version=seen.version,
                        )  # fmt: skip
                else:
                    self._give_way(seen.version, ids, items, len(self._items_of(seen)))
            except (VersionConflictError, UnknownMessageError):
                continue
            return True
        return False

    def _give_way(self, version: int, ids: list[str], items: list[Any], before: int) -> Any:
        """The messages `ids` (holding `before` items) give way to one summary holding
        `items`, as one compress event, or are hidden (a delete) when there are none;
        at `version`, else VersionConflictError."""
        if not items:
            return self.store.delete(self.context_id, ids, expected_version=version)
        stats = {"source": "agents-compaction", "items_before": before, "items_after": len(items)}
        return self.store.compress(
            self.context_id, ids, summary_message(items), stats=stats, expected_version=version
        )

    def _tail(self, limit: int) -> _Tail:
        seen = self.store.visible(self.context_id, inline=True)
        ids = [m.id for m in seen.messages if m.id is not None]
        held = [
            held_items(m.metadata, m.content, m.native) for m in seen.messages if m.id is not None
        ]
        first, count = len(held), 0
        while first > 0 and count < limit:
            first -= 1
            count += len(held[first])
        return _Tail(seen.version, ids, held, first, max(count - limit, 0))

    def _replace_suffix(
        self, tail: _Tail, start: int, output: list[Any], prune: Callable[[Any], bool] | None
    ) -> bool:
        """Items `start`... of the snapshot `tail` become `output`: the messages holding
        them are compressed into one summary (its items: the first message's items before
        `start`, then `output`), or deleted when that leaves none."""
        at, skip = tail.first, tail.skip + start
        while skip >= len(tail.held[at]):  # the message holding item `start`
            skip -= len(tail.held[at])
            at += 1
        kept = tail.held[at][:skip] + output
        before = sum(len(h) for h in tail.held[at:])
        try:
            done = self._give_way(tail.version, tail.ids[at:], kept, before)
        except (VersionConflictError, UnknownMessageError):
            return False
        expired = 0
        while prune is not None and expired < at and tail.held[expired]:
            if not all(prune(i) for i in tail.held[expired]):
                break
            expired += 1
        if expired:
            # Best effort: after a racing write the expired items wait for the next time.
            with contextlib.suppress(VersionConflictError, UnknownMessageError):
                self.store.delete(
                    self.context_id, tail.ids[:expired], expected_version=done.version
                )
        return True

    @staticmethod
    def _items_of(seen: VisibleContext) -> list[Any]:
        messages = repair(seen.messages)[0]
        return [i for m in messages for i in held_items(m.metadata, m.content, m.native)]
