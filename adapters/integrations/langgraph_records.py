"""How the LangGraph checkpointer keeps a thread in its context (langgraph_saver.py): each
checkpoint, channel value and task's writes as a record holding LangGraph's serialized
bytes, and the thread as read back from those records.

A record longer than PART_CHARS (a channel holding a long conversation as one value, as
LangGraph's default reducer keeps it) is stored as several, each holding a part of its
JSON: a message's size is bounded (CTXSTORE_MAX_MESSAGE_BYTES), a thread's state is not.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from ctxstore.adapters.integrations.sdk_messages import as_record
from ctxstore.domain.messages import Message
from ctxstore.domain.plain import is_record

KEY = "langgraph"  # metadata key of the saver's records
HELD = "ctxstore-messages"  # a blob's type when its value is the context's messages
PART_CHARS = 256 * 1024  # a record's JSON longer than this is stored in parts this long


def typed(value: tuple[str, bytes]) -> list[str]:
    return [value[0], base64.b64encode(value[1]).decode("ascii")]


def untyped(value: list[str]) -> tuple[str, bytes]:
    return value[0], base64.b64decode(value[1])


def version_key(ns: str, channel: str, version: Any) -> str:
    return json.dumps([ns, channel, version])


@dataclass
class Thread:
    """A thread's records, read from its context's visible messages."""

    cid: UUID
    version: int = 0  # the context's version it was read at
    erasures: int = -1  # how many times its id had been erased (-1: not known, over HTTP)
    checkpoints: dict[tuple[str, str], tuple[dict[str, Any], str]] = field(default_factory=dict)
    blobs: dict[str, tuple[dict[str, Any], str]] = field(default_factory=dict)
    writes: dict[tuple[str, str], list[tuple[dict[str, Any], str]]] = field(default_factory=dict)
    messages: list[Message] = field(default_factory=list)
    # Each message's LangChain fields as last written or compared (a shallow copy), in the
    # messages' order: what tells quickly that a step left it as it was (langgraph_saver).
    prints: list[dict[str, Any] | None] = field(default_factory=list)
    # The messages by id, shared with the versions the saver read them at: a message is
    # never changed under its id here (an edit makes the saver read the thread anew).
    by_id: dict[str, Message] = field(default_factory=dict)
    # A record stored in parts: the ids of its other parts, by the id of its first.
    also: dict[str, list[str]] = field(default_factory=dict)
    _parts: dict[str, dict[int, tuple[str, str]]] = field(default_factory=dict)

    @classmethod
    def read(cls, cid: UUID, version: int, messages: Sequence[Message]) -> Thread:
        found = cls(cid, version)
        for m in messages:
            kept = m.metadata.get(KEY) if is_record(m) else None
            if isinstance(kept, dict):
                found.add(kept, str(m.id))
            elif not is_record(m):
                found.messages.append(m)
        found.prints = [None] * len(found.messages)
        found.by_id = {str(m.id): m for m in found.messages}
        return found

    def add(self, kept: dict[str, Any], mid: str) -> None:
        kind = kept.get("kind")
        if kind == "part":
            self._add_part(kept, mid)
        elif kind == "checkpoint":
            self.checkpoints[(kept["ns"], kept["id"])] = (kept, mid)
        elif kind == "blob":
            self.blobs[version_key(kept["ns"], kept["channel"], kept["version"])] = (kept, mid)
        elif kind == "writes":
            self.writes.setdefault((kept["ns"], kept["checkpoint_id"]), []).append((kept, mid))

    def _add_part(self, kept: dict[str, Any], mid: str) -> None:
        """One part of a long record; the record is added once all its parts are here."""
        parts = self._parts.setdefault(str(kept["of"]), {})
        parts[int(kept["i"])] = (str(kept["text"]), mid)
        n = int(kept["n"])
        if len(parts) < n or any(i not in parts for i in range(n)):
            return
        del self._parts[str(kept["of"])]
        whole = json.loads("".join(parts[i][0] for i in range(n)))
        first = parts[0][1]
        self.also[first] = [parts[i][1] for i in range(1, n)]
        self.add(whole, first)

    def with_parts(self, ids: list[str]) -> list[str]:
        """Message ids of these records, every part of each."""
        return [x for i in ids for x in (i, *self.also.get(i, ()))]

    def namespaces(self) -> list[str]:
        return sorted({ns for ns, _ in self.checkpoints})

    def ids(self, ns: str) -> list[str]:
        """The namespace's checkpoint ids, newest first (LangGraph's ids sort by time)."""
        return sorted((i for n, i in self.checkpoints if n == ns), reverse=True)


def record(kept: dict[str, Any]) -> dict[str, Any]:
    """The record keeping one of the saver's: a checkpoint, a channel value, a task's writes."""
    return as_record({KEY: kept})


def in_parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    """A record as the messages that store it: itself, or its JSON in parts when long."""
    kept = message["metadata"][KEY]
    text = json.dumps(kept, separators=(",", ":"))  # ASCII: characters are bytes
    if len(text) <= PART_CHARS:
        return [message]
    of, n = uuid.uuid4().hex, -(-len(text) // PART_CHARS)
    return [
        record({"kind": "part", "of": of, "i": i, "n": n,
                "text": text[i * PART_CHARS : (i + 1) * PART_CHARS]})
        for i in range(n)
    ]  # fmt: skip
