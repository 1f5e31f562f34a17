"""A Google ADK session service on ctxstore (`pip install 'ctxstore[adk]'`).

    sessions = CtxStoreSessionService(ctxstore.open("sqlite:///sessions.db"))
    runner = Runner(agent=agent, app_name="weather", session_service=sessions)

Each ADK session is a ctxstore context found by (app, user, session id). Its first message
is a record of the state it was created with; every event ADK appends is one message
keeping the event exactly (read back equal): an event with content is a Gemini message —
its Content as the message's payload, the rest of the event's JSON in its metadata — so
the context reads as the conversation in Gemini's own shape (`to_gemini()`; the other
shapes by conversion), pairs each function call with its response and counts its tokens;
an event without content (a state change, a transfer) is a record — kept in the history,
never sent to a model. A session's state is folded from those events as ADK defines it: `app:` keys are
shared by every user of the app, `user:` keys by the user's sessions (each scope a context
holding its current state, replaced on change, so its history shows every change), other
keys belong to the session, and `temp:` keys are never stored.

Stale writers are refused as ADK's database service refuses them: a session carries the
context's version it was read at, and appending with an older one raises
StaleSessionError (an optimistic `expected_version`, so two racing writers never both
win). Appending an event that is already stored (a retry after a lost reply) is a no-op.
`delete_session` erases the context.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any
from uuid import UUID

from ctxstore.domain.errors import MissingExtraError

try:
    from google.adk.errors._stale_session_error import StaleSessionError
    from google.adk.errors.already_exists_error import AlreadyExistsError
    from google.adk.errors.session_not_found_error import SessionNotFoundError
    from google.adk.events.event import Event
    from google.adk.sessions import _session_util
    from google.adk.sessions.base_session_service import (
        BaseSessionService,
        GetSessionConfig,
        ListSessionsResponse,
    )
    from google.adk.sessions.session import Session
    from google.adk.sessions.state import State
except ModuleNotFoundError as exc:  # the extra is not installed: say which
    raise MissingExtraError("the Google ADK session service", "adk") from exc

from ctxstore.adapters.integrations.adk_events import (
    CREATED,
    EVENT,
    STATE,
    Folded,
    asked,
    event_json,
    event_message,
    event_record,
    fold,
    kept_under,
    scan,
    scan_state,
    stored_event_json,
)
from ctxstore.adapters.integrations.sdk_messages import (
    as_record,
    insert_or_record,
    insert_or_record_awaited,
)
from ctxstore.adapters.integrations.surface import (
    LRU,
    AwaitedStore,
    faces,
    hooks_of,
    named_contexts,
)
from ctxstore.adapters.store.contract import ContextOperations
from ctxstore.adapters.store.contract_async import AsyncContextOperations
from ctxstore.domain.errors import (
    ContextNotFoundError,
    MalformedTranscriptError,
    VersionConflictError,
)
from ctxstore.domain.messages import Message

AS_GIVEN = {"ctxstore": {"transcript": "as-given"}}  # ADK owns its history's validity
REASON = "deleted through Google ADK's BaseSessionService.delete_session"
STALE = (
    "The session has been modified in storage since it was loaded. "
    "Please reload the session before appending more events."
)
RETRIES = 20  # rounds of read-merge-write for an app's or a user's state under contention
# What the insert of an event's message may refuse, and a record keeps instead (_record):
# a call parted from its result only. Its content was read as Gemini already (_message);
# anything else the insert refuses (an attachment it cannot keep) ADK hears, as before.
UNPAIRED = (MalformedTranscriptError,)
ABSENT = object()  # a read's answer when the session does not exist
FOLDED = 256  # sessions whose folded state and event times are remembered


class CtxStoreSessionService(BaseSessionService):
    """ADK's BaseSessionService (get_user_state included) over a ctxstore store."""

    def __init__(
        self, store: ContextOperations | AsyncContextOperations, *, key_prefix: str = "adk:"
    ) -> None:
        # An async store (ctxstore.aopen): events appended on the loop; the rest on threads
        # through its sync twin (the same storage and cache).
        self._faces = faces(store)
        self.store = self._faces.sync
        self.prefix = key_prefix
        # Where the surface holds events (not over HTTP): get_session builds only the
        # events asked for, from a fold remembered by the session's head mark.
        self._hooks = hooks_of(self.store)
        self._folded: LRU[UUID, Folded] = LRU(FOLDED)

    # ---- the protocol -------------------------------------------------------------------

    async def create_session(
        self, *, app_name: str, user_id: str, state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:  # fmt: skip
        return await asyncio.to_thread(self._create, app_name, user_id, state, session_id)

    async def get_session(
        self, *, app_name: str, user_id: str, session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:  # fmt: skip
        return await asyncio.to_thread(self._get, app_name, user_id, session_id, config)

    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        return await asyncio.to_thread(self._list, app_name, user_id)

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        await asyncio.to_thread(self._delete, app_name, user_id, session_id)

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        return await asyncio.to_thread(self._state_of, self._user_key(app_name, user_id))

    async def append_event(self, session: Session, event: Event) -> Event:
        if event.partial:
            return event
        # temp: keys live in this invocation's session only, never in storage (ADK's rule)
        self._apply_temp_state(session, event)
        event = self._trim_temp_delta_state(event)
        await self._faces.write(
            lambda _: self._append(session, event),
            lambda a: self._append_awaited(a, session, event),
        )
        return self._commit_event_to_session(session, event)

    async def _append_awaited(self, store: AwaitedStore, session: Session, event: Event) -> None:
        """`_append` through an async store: its reads and the insert awaited on the loop
        (an app's or a user's state change, rare, on a thread)."""
        key = self._session_key(session.app_name, session.user_id, session.id)
        cid = await store.lookup_key(key)
        try:
            seen = None if cid is None else await store.visible(cid)
        except ContextNotFoundError:
            seen = None
        if cid is None or seen is None or not seen.messages:
            raise SessionNotFoundError(f"Session {session.id} not found.")
        expected = self._expected(session, seen.version, seen.messages)
        try:
            written = await insert_or_record_awaited(
                store, cid, event_message(event), lambda: event_record(event), expected_version=expected,
                refused=UNPAIRED,
            )  # fmt: skip
        except VersionConflictError:
            again = (await store.visible(cid)).messages
            if any(
                kept_under(m, EVENT).get("id") == event.id for m in again if EVENT in m.metadata
            ):
                return  # our own earlier attempt landed (a lost reply)
            raise StaleSessionError(STALE) from None
        delta = event.actions.state_delta or {}
        if any(k.startswith((State.APP_PREFIX, State.USER_PREFIX)) for k in delta):
            await asyncio.to_thread(self._apply_shared, session.app_name, session.user_id, delta)
        session.last_update_time = event.timestamp
        session._storage_update_marker = str(written.version)

    # ---- keys ---------------------------------------------------------------------------

    def _key(self, kind: str, *parts: str) -> str:
        return f"{self.prefix}{kind}:" + json.dumps(list(parts), ensure_ascii=False)

    def context_key(self, app: str, user: str, sid: str) -> str:
        """The key of a session's context (`context_for_key`): what capture records into."""
        return self._session_key(app, user, sid.strip())

    def _session_key(self, app: str, user: str, sid: str) -> str:
        return self._key("session", app, user, sid)

    def _user_key(self, app: str, user: str) -> str:
        return self._key("user", app, user)

    def _app_key(self, app: str) -> str:
        return self._key("app", app)

    def _found(self, key: str) -> UUID:
        return self.store.context_for_key(key, metadata=AS_GIVEN)

    def _held(self, key: str, *, inline: bool = True) -> tuple[UUID, int, list[Message]] | None:
        """A keyed context's id, version and messages (attachments as their data unless not
        `inline`); None when it holds nothing (a read never creates the context)."""
        cid = self.store.lookup_key(key)
        if cid is None:
            return None
        try:
            seen = self.store.visible(cid, inline=inline)
        except ContextNotFoundError:
            return None
        return (cid, seen.version, seen.messages) if seen.messages else None

    # ---- state ----------------------------------------------------------------------------

    def _state_of(self, key: str) -> dict[str, Any]:
        held = self._held(key)
        return dict(kept_under(held[2][-1], STATE)) if held else {}

    def _merge_into(self, key: str, delta: dict[str, Any]) -> None:
        """dict.update of an app's or a user's state: one replace, retried on a race."""
        cid = self._found(key)
        for _ in range(RETRIES):
            seen = self.store.visible(cid, inline=True)
            last = seen.messages[-1] if seen.messages else None
            state = {**(kept_under(last, STATE) if last else {}), **delta}
            record = as_record({STATE: state})
            try:
                if last is None:
                    self.store.insert(cid, record, expected_version=seen.version)
                else:
                    self.store.replace(cid, last.id or "", record, expected_version=seen.version)
                return
            except VersionConflictError:
                continue  # another writer merged first: merge into theirs
        raise VersionConflictError(f"{key}: state kept changing under {RETRIES} attempts")

    def _apply_shared(self, app: str, user: str, delta: dict[str, Any]) -> dict[str, Any]:
        """Stores the app: and user: parts of a delta; returns the session's part."""
        parts = _session_util.extract_json_safe_state_delta(delta)
        if parts["app"]:
            self._merge_into(self._app_key(app), parts["app"])
        if parts["user"]:
            self._merge_into(self._user_key(app, user), parts["user"])
        return dict(parts["session"])

    def _merged(self, app: str, user: str, own: dict[str, Any]) -> dict[str, Any]:
        merged = dict(own)
        for prefix, key in [(State.APP_PREFIX, self._app_key(app)),
                            (State.USER_PREFIX, self._user_key(app, user))]:  # fmt: skip
            merged.update({prefix + k: v for k, v in self._state_of(key).items()})
        return merged

    # ---- the work, on a thread ------------------------------------------------------------

    def _create(
        self, app: str, user: str, state: dict[str, Any] | None, session_id: str | None
    ) -> Session:
        sid = (session_id or "").strip() or str(uuid.uuid4())
        cid = self._found(self._session_key(app, user, sid))
        seen = self.store.visible(cid)
        if seen.messages:
            raise AlreadyExistsError(f"Session with id {sid} already exists.")
        now = time.time()
        own = _session_util.extract_json_safe_state_delta(state or {})["session"]
        record = as_record({CREATED: {"app_name": app, "user_id": user, "id": sid,
                                      "state": own, "created": now}})  # fmt: skip
        try:  # the version makes two racing creates of one id: one wins, one is told
            written = self.store.insert(cid, record, expected_version=seen.version)
        except VersionConflictError:
            raise AlreadyExistsError(f"Session with id {sid} already exists.") from None
        self._apply_shared(app, user, state or {})
        session = Session(
            app_name=app, user_id=user, id=sid, state=self._merged(app, user, own),
            last_update_time=now,
        )  # fmt: skip
        session._storage_update_marker = str(written.version)
        return session

    def _get(
        self, app: str, user: str, sid: str, config: GetSessionConfig | None
    ) -> Session | None:
        key = self._session_key(app, user, sid.strip())
        read = self._read_stored(key, config) if self._hooks is not None else None
        if read is None:  # over HTTP, or a session that kept changing while read
            held = self._held(key)
            if held is None:
                return None
            _, version, messages = held
            own, kept, updated = scan(messages)
            # Only the events asked for are built (GetSessionConfig: after a time, the last N).
            events = [event_json(m) for _, m in asked(kept, config)]
        elif read is ABSENT:
            return None
        else:
            version, own, updated, events = read
        session = Session(
            app_name=app, user_id=user, id=sid.strip(), state=self._merged(app, user, own),
            events=[Event.model_validate_json(json.dumps(e)) for e in events],
            last_update_time=updated,
        )  # fmt: skip
        session._storage_update_marker = str(version)
        return session

    def _read_stored(self, key: str, config: GetSessionConfig | None) -> Any:
        """(version, own state, last update, the asked events' JSON) from the stored
        messages: the session folded once per head mark, then only the newest messages
        that hold the events asked for. ABSENT when there is no session; None when it
        kept changing between the two head reads that bracket each attempt."""
        assert self._hooks is not None
        hooks = self._hooks
        cid = self.store.lookup_key(key)
        if cid is None:
            return ABSENT
        for _ in range(RETRIES):
            try:
                mark = hooks.head_mark(cid)
                folded = self._folded.get(cid)
                if folded is None or folded.mark != mark:
                    metas = [m.get("metadata") or {} for m in hooks.visible_messages(cid)]
                    if not metas:
                        return ABSENT
                    folded = fold(mark, metas)
                positions = [p for _, p in asked(folded.times, config)]
                first = min(positions, default=folded.visible)
                newest = hooks.visible_messages(cid, last=folded.visible - first, inline=True)
                if hooks.head_mark(cid) != mark:
                    continue  # written between the reads: read again
            except ContextNotFoundError:
                return ABSENT
            self._folded[cid] = folded
            events = [stored_event_json(newest[p - first]) for p in positions]
            return mark[0], dict(folded.state), folded.updated, events
        return None

    def _list(self, app: str, user: str | None) -> ListSessionsResponse:
        """One listing of the app's (or the user's) session contexts, then each session's
        visible messages once: its state and last update folded from the events' JSON (no
        Event built: a listed session has none); the app's and each user's state read once."""
        named = [app] if user is None else [app, user]
        start = self._key("session", *named)[:-1] + ","
        app_state = self._state_of(self._app_key(app))
        user_states: dict[str, dict[str, Any]] = {}
        found = []
        for c in named_contexts(self.store, start):
            name = c.name or ""
            app_name, user_id, sid = json.loads(name[len(self.prefix + "session:") :])
            if app_name != app:
                continue
            try:
                metas = self._metadata_of(c.context_id)
            except ContextNotFoundError:  # erased since it was listed
                continue
            if not metas or CREATED not in metas[0]:
                continue
            own, updated = scan_state(metas)
            if user_id not in user_states:
                user_states[user_id] = self._state_of(self._user_key(app, user_id))
            state = {State.APP_PREFIX + k: v for k, v in app_state.items()}
            state.update({State.USER_PREFIX + k: v for k, v in user_states[user_id].items()})
            found.append(Session(
                app_name=app, user_id=user_id, id=sid, state={**own, **state},
                last_update_time=updated,
            ))  # fmt: skip
        # oldest first, as the base class documents (ADK's SQLite service's order)
        found.sort(key=lambda s: (s.last_update_time, s.user_id, s.id))
        return ListSessionsResponse(sessions=found)

    def _metadata_of(self, cid: UUID) -> list[dict[str, Any]]:
        """Each visible message's metadata: from the stored JSON where the store offers it
        (no Message built), else from the visible context (over HTTP)."""
        if self._hooks is not None:
            return [m.get("metadata") or {} for m in self._hooks.visible_messages(cid)]
        return [m.metadata for m in self.store.visible(cid).messages]

    def _delete(self, app: str, user: str, sid: str) -> None:
        held = self._held(self._session_key(app, user, sid.strip()))
        if held is not None:
            self.store.erase(held[0], reason=REASON, with_forks=True)

    def _append(self, session: Session, event: Event) -> None:
        key = self._session_key(session.app_name, session.user_id, session.id)
        held = self._held(key, inline=False)  # (the version and event ids: no payloads)
        if held is None:
            raise SessionNotFoundError(f"Session {session.id} not found.")
        cid, version, messages = held
        expected = self._expected(session, version, messages)
        try:
            written = insert_or_record(
                self.store, cid, event_message(event), lambda: event_record(event), expected_version=expected,
                refused=UNPAIRED,
            )  # fmt: skip
        except VersionConflictError:
            if self._stored(cid, event.id):  # our own earlier attempt landed (a lost reply)
                return
            raise StaleSessionError(STALE) from None
        self._apply_shared(session.app_name, session.user_id, event.actions.state_delta or {})
        session.last_update_time = event.timestamp
        session._storage_update_marker = str(written.version)

    def _expected(self, session: Session, version: int, messages: list[Message]) -> int:
        """The version this session was read at; refuses a session storage has moved past."""
        marker = session._storage_update_marker
        if marker is not None:
            return int(marker)
        # A session not read through this service (no marker): current when its events are
        # storage's, or when storage has not moved past it (ADK's database service's rule).
        stored = [kept_under(m, EVENT)["id"] for m in messages if EVENT in m.metadata]
        updated = scan_state([m.metadata for m in messages])[1]
        if updated > session.last_update_time and stored != [e.id for e in session.events]:
            raise StaleSessionError(STALE)
        return version

    def _stored(self, cid: UUID, event_id: str) -> bool:
        seen = self.store.visible(cid).messages
        return any(kept_under(m, EVENT).get("id") == event_id for m in seen if EVENT in m.metadata)
