"""How the LangGraph checkpointer keeps a thread in its context (langgraph_saver.py): each
checkpoint, channel value and task's writes as a record holding LangGraph's serialized
bytes, and the thread as read back from those records."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from ctxstore.domain.messages import Message
from ctxstore.domain.plain import RECORD_MARK, is_record

KEY = "langgraph"  # metadata key of the saver's records
HELD = "ctxstore-messages"  # a blob's type when its value is the context's messages


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
    checkpoints: dict[tuple[str, str], tuple[dict[str, Any], str]] = field(default_factory=dict)
    blobs: dict[str, tuple[dict[str, Any], str]] = field(default_factory=dict)
    writes: dict[tuple[str, str], list[tuple[dict[str, Any], str]]] = field(default_factory=dict)
    messages: list[Message] = field(default_factory=list)

    @classmethod
    def read(cls, cid: UUID, version: int, messages: Sequence[Message]) -> Thread:
        found = cls(cid, version)
        for m in messages:
            kept = m.metadata.get(KEY) if is_record(m) else None
            if isinstance(kept, dict):
                found.add(kept, str(m.id))
            elif not is_record(m):
                found.messages.append(m)
        return found

    def add(self, kept: dict[str, Any], mid: str) -> None:
        kind = kept.get("kind")
        if kind == "checkpoint":
            self.checkpoints[(kept["ns"], kept["id"])] = (kept, mid)
        elif kind == "blob":
            self.blobs[version_key(kept["ns"], kept["channel"], kept["version"])] = (kept, mid)
        elif kind == "writes":
            self.writes.setdefault((kept["ns"], kept["checkpoint_id"]), []).append((kept, mid))

    def namespaces(self) -> list[str]:
        return sorted({ns for ns, _ in self.checkpoints})

    def ids(self, ns: str) -> list[str]:
        """The namespace's checkpoint ids, newest first (LangGraph's ids sort by time)."""
        return sorted((i for n, i in self.checkpoints if n == ns), reverse=True)


def record(kept: dict[str, Any]) -> dict[str, Any]:
    return {"role": "developer", "content": "", "metadata": {**RECORD_MARK, KEY: kept}}
