"""JSON for stored events in which no user data is ever reinterpreted.

The library's JSONTranscoder decodes any object of the form {"_type_": ..., "_data_": ...}
as a tagged value, so a message whose metadata had that shape would make its context
unreadable. Here only the library's own datetime fields are tagged (in the library's
format, so stored rows look the same) and only those positions are decoded as tags.

Encoding is orjson's, ten times the standard library's speed on a snapshot of a long
context (the cost a write pays when it snapshots). For what ctxstore stores (validated
JSON: no NaN, string keys) both write the same bytes, except that orjson spells some
floats otherwise (1e-05 as 0.00001), which read back as the same numbers. Anything orjson
refuses (an integer past 64 bits, a key that is not a string, nesting past 254 levels)
goes through the standard encoder, which accepts or refuses it as it always did. orjson
writes NaN and infinities as null: no state holds one, because every way user JSON comes
in refuses them (tests/integration/test_hostile_input.py). States hold no UUID (the mapper
takes the originator id out), which orjson would write as a string, not as a tag.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from typing import Any
from uuid import UUID

import orjson
from eventsourcing.persistence import Transcoder

DATETIME = "datetime_iso"
UUID_HEX = "uuid_hex"


def _tag(o: Any) -> dict[str, str]:
    if isinstance(o, datetime):
        return {"_type_": DATETIME, "_data_": o.isoformat()}
    if isinstance(o, UUID):
        return {"_type_": UUID_HEX, "_data_": o.hex}
    raise TypeError(f"a {type(o).__name__} is not JSON")


def _untag(holder: dict[str, Any], key: str) -> None:
    value = holder.get(key)
    if isinstance(value, dict) and value.keys() == {"_type_", "_data_"}:
        if value["_type_"] == DATETIME:
            holder[key] = datetime.fromisoformat(value["_data_"])
        elif value["_type_"] == UUID_HEX:
            holder[key] = UUID(value["_data_"])


def untag_event(state: dict[str, Any]) -> dict[str, Any]:
    """An event's decoded JSON with the library's tagged fields turned back into values."""
    _untag(state, "timestamp")
    return state


# orjson writes datetimes and dataclasses itself unless told to pass them to `default`.
_ORJSON = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


class ContextTranscoder(Transcoder):
    """Encodes event and snapshot state; decodes tags only where the library put them."""

    def __init__(self) -> None:
        self._encoder = json.JSONEncoder(default=_tag, separators=(",", ":"), ensure_ascii=False)

    def encode(self, obj: Any) -> bytes:
        try:
            return orjson.dumps(obj, default=_tag, option=_ORJSON)
        except orjson.JSONEncodeError:
            return self.encode_standard(obj)

    def encode_standard(self, obj: Any) -> bytes:
        """What the standard library's encoder writes (as every event before orjson was)."""
        return self._encoder.encode(obj).encode("utf8")

    def encodings(self, obj: Any) -> Iterator[bytes]:
        """The texts a stored state of `obj` may have: as written now, then as written
        before orjson (the two spell some floats differently)."""
        yield self.encode(obj)
        yield self.encode_standard(obj)

    def decode(self, data: bytes) -> Any:
        obj = json.loads(data)
        if isinstance(obj, dict):
            _untag(obj, "timestamp")  # every event and snapshot
            state = obj.get("state")
            if "topic" in obj and isinstance(state, dict):  # a snapshot of an aggregate
                _untag(state, "_created_on")
                _untag(state, "_modified_on")
        return obj
