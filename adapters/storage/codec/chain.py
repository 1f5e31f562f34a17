"""Tamper evidence: every stored event carries a hash chained to its context's previous event.

An event's stored state is the transcoder's JSON object with one last member,
`"chain":"<sha256 hex>"`, where the hash covers the previous event's chain, the context id,
the version, the event type and the JSON before that member. Altering any stored event
(its state, version, type or context) breaks its own link or the next one; deleting one
leaves a gap in the versions. Checking needs no JSON parsing: the hashed bytes are the
stored bytes (after the cipher and compressor, if any, are undone).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any
from uuid import UUID

import orjson
from eventsourcing.persistence import Mapper, StoredEvent
from eventsourcing.utils import get_topic, resolve_topic
from pydantic import BaseModel, ConfigDict

from ctxstore.adapters.storage.codec.transcoder import untag_event

GENESIS = "0" * 64  # the "previous chain" of a context's first event
SUFFIX_LEN = len(b',"chain":"') + 64 + len(b'"}')


def link(
    prev: str, context_id: UUID | str, version: int, topic: str, *body: bytes | memoryview
) -> str:
    """The chain value of one event: a hash over the previous chain and this event.

    `context_id` as a UUID or its 32-digit hex; `body` the stored JSON before the chain
    member, in one or more pieces (verify passes a view of the stored bytes, not a copy).
    """
    hex_id = context_id.hex if isinstance(context_id, UUID) else context_id
    h = hashlib.sha256(f"{prev}\n{hex_id}\n{version}\n{topic}\n".encode())
    for part in body:
        h.update(part)
    return h.hexdigest()


def seal(body: bytes, chain: str) -> bytes:
    """The stored JSON object with the chain as its last member."""
    sep = b"," if len(body) > 2 else b""
    return body[:-1] + sep + b'"chain":"' + chain.encode() + b'"}'


def chain_of(state: bytes) -> tuple[int, str] | None:
    """Where a stored state's chain member starts, and the chain; None if it carries none.

    The hashed body is `state[:start] + b"}"`.
    """
    tail = state[-SUFFIX_LEN:]
    if len(state) > SUFFIX_LEN and tail[:10] == b',"chain":"' and tail[-2:] == b'"}':
        return len(state) - SUFFIX_LEN, tail[10:74].decode("ascii", "replace")
    return None


def unseal(state: bytes) -> tuple[bytes, str | None]:
    """The hashed body and the chain of a stored state; (state, None) if it carries none."""
    found = chain_of(state)
    if found is None:
        return state, None
    return state[: found[0]] + b"}", found[1]


def command_of(body: bytes) -> str | None:
    """The id of the command that stored an event (None for events stored without one)."""
    try:
        found = orjson.loads(body).get("command")
    except (orjson.JSONDecodeError, AttributeError):
        return None
    return found if isinstance(found, str) else None


def anchor(state: bytes) -> str:
    """What a new event chains to when the event before it carries no chain (older data)."""
    return hashlib.sha256(state).hexdigest()


class ChainingMapper(Mapper[UUID]):
    """The library's mapper, sealing each event with its chain before compression and
    encryption. Encryption is with the context's own data key (`keys`, adapters/keys/), not
    the library's one store-wide cipher: every state is sealed and opened knowing whose it is.
    """

    keys: Any = None  # ContextCipher, when the store encrypts

    def to_stored_event(self, domain_event: Any) -> StoredEvent:
        # Snapshots come this way (events go through to_sealed_events).
        stored = super().to_stored_event(domain_event)
        if self.keys is None:
            return stored
        cid = stored.originator_id
        return StoredEvent(
            cid, stored.originator_version, stored.topic, self.keys.encrypt(cid, stored.state)
        )

    def to_domain_event(self, stored_event: StoredEvent) -> Any:
        if self.keys is not None:
            cid = stored_event.originator_id
            stored_event = StoredEvent(
                cid, stored_event.originator_version, stored_event.topic,
                self.keys.decrypt(_uuid(cid), stored_event.state),
            )  # fmt: skip
        return super().to_domain_event(stored_event)

    def to_sealed_events(
        self, events: Sequence[Any], prev: str, command: str | None = None
    ) -> tuple[list[StoredEvent], str]:
        """Stored events for a run of one context's consecutive events; and the last chain.
        `command` (the id of the command that made them) is stored in each, so a writer
        whose reply was lost can tell its own events from another writer's."""
        stored = []
        for e in events:
            state = dict(vars(e))
            if command is not None:
                state["command"] = command
            context_id = state.pop("originator_id")
            version = state.pop("originator_version")
            class_version = getattr(type(e), "class_version", 1)
            if class_version > 1:
                state["class_version"] = class_version
            topic = get_topic(type(e))
            body = self.transcoder.encode(state)
            prev = link(prev, context_id, version, topic, body)
            stored.append(
                StoredEvent(
                    originator_id=context_id,
                    originator_version=version,
                    topic=topic,
                    state=self._wrap(seal(body, prev), context_id),
                )
            )
        return stored, prev

    def seal_and_wrap(self, body: bytes, chain: str, context_id: UUID) -> bytes:
        """A stored state from a transcoded body and its chain."""
        return self._wrap(seal(body, chain), context_id)

    def event_from_state(self, topic: str, context_id: UUID, version: int, state: Any) -> Any:
        """A domain event from its state as decoded JSON (what to_domain_event builds).

        An import has each line's JSON decoded already; the library's to_domain_event would
        decode it again from bytes, a quarter of an import's time.
        """
        cls = resolve_topic(topic)
        event_state = untag_event(dict(state))
        event_state.pop("chain", None)
        event_state["originator_id"] = context_id
        event_state["originator_version"] = version
        from_version = event_state.pop("class_version", 1)
        while from_version < getattr(cls, "class_version", 1):
            getattr(cls, f"upcast_v{from_version}_v{from_version + 1}")(event_state)
            from_version += 1
        event = object.__new__(cls)
        object.__setattr__(event, "__dict__", event_state)
        return event

    def plaintext(self, state: bytes, context_id: UUID | str) -> bytes:
        """A stored state of a context with the cipher and compressor undone."""
        if self.keys is not None:
            state = self.keys.decrypt(_uuid(context_id), state)
        if self.compressor:
            state = self.compressor.decompress(state)
        return state

    def _wrap(self, state: bytes, context_id: UUID) -> bytes:
        if self.compressor:
            state = self.compressor.compress(state)
        if self.keys is not None:
            state = self.keys.encrypt(context_id, state)
        return state


def _uuid(context_id: Any) -> UUID:
    return context_id if isinstance(context_id, UUID) else UUID(str(context_id))


class BrokenLink(BaseModel):
    """The first event of a context whose stored form does not match its chain."""

    model_config = ConfigDict(frozen=True)

    context_id: UUID
    version: int
    reason: str


class Verification(BaseModel):
    """What `verify` found: events and contexts checked, legacy events, broken links."""

    model_config = ConfigDict(frozen=True)

    contexts: int
    events: int
    unchained: int  # events written before tamper evidence existed (not checkable)
    broken: list[BrokenLink]
    seconds: float

    @property
    def ok(self) -> bool:
        return not self.broken


Row = tuple[str, int, str, bytes]  # context id (32 hex digits), version, topic, state


BLOB_MARK = b"ctxstore-blob:"  # an attachment's reference (domain/blobs.py)
BLOB_SHA = re.compile(rb"ctxstore-blob:sha256:([0-9a-f]{64})")


class ChainWalker:
    """Checks one context's stored events in version order, link by link."""

    def __init__(
        self, context_hex: str, mapper: ChainingMapper, origin: tuple[int, str, bool] | None = None
    ) -> None:
        self.context_hex = context_hex
        # A bounded history's checkpoint: (version, its chain, whether its signature holds).
        self.origin = origin
        context_id = UUID(context_hex)
        self.plaintext: Callable[[bytes], bytes] = partial(mapper.plaintext, context_id=context_id)
        self.version = 0
        self.prev = GENESIS
        self.chained = False  # a chained event was seen: every later one must be chained
        self.unchained = 0
        self.broken: BrokenLink | None = None
        self.attachments: dict[str, int] = {}  # sha256 -> the first version referring to it

    def check(self, version: int, topic: str, state: bytes) -> None:
        """Check the next event; after the first broken link, nothing more."""
        if self.broken is not None:
            return
        if version != self.version + 1 and not self._resumes_at_origin(version):
            if self.broken is None:  # (an altered checkpoint already said why)
                self.fail(
                    self.version + 1, f"version {self.version + 1} is missing (next: {version})"
                )
            return
        self.version = version
        try:
            state = self.plaintext(state)
        except Exception as exc:  # noqa: BLE001  # any cipher's or compressor's refusal
            self.fail(version, f"stored state cannot be read: {exc}")
            return
        if BLOB_MARK in state:  # the chain covers the reference; verify checks its bytes
            for sha in BLOB_SHA.findall(bytes(state)):
                self.attachments.setdefault(sha.decode("ascii"), version)
        found = chain_of(state)
        if found is None:
            if self.chained:
                self.fail(version, "the event carries no chain, but earlier events do")
                return
            self.unchained += 1
            self.prev = anchor(state)
            return
        self.chained = True
        end, chain = found
        if (
            link(self.prev, self.context_hex, version, topic, memoryview(state)[:end], b"}")
            != chain
        ):
            self.fail(version, "stored event does not match its chain (altered or reordered)")
            return
        self.prev = chain

    def _resumes_at_origin(self, version: int) -> bool:
        """Whether `version` is where a bounded history resumes after its creation event:
        the chain goes on from the checkpoint's, if its signature holds."""
        if self.origin is None or self.version != 1 or version != self.origin[0] + 1:
            return False
        if not self.origin[2]:
            self.fail(version, "the retention checkpoint's signature does not match (altered)")
            return False
        self.version, self.prev = self.origin[0], self.origin[1]
        return True

    def fail(self, version: int, reason: str) -> None:
        self.broken = BrokenLink(context_id=UUID(self.context_hex), version=version, reason=reason)
