"""What a conversion between shapes did not carry: every value of the source message that
appears nowhere in what it became is named, so no conversion loses data silently.

The check is by value, not by field name (each shape names things its own way): a text,
an id, a number or a true flag of the source must occur in the converted message, inside
one of its strings (texts joined, arguments serialised) or as its own value. A string
that is JSON (a function's arguments) is checked by the values inside it, a `data:` URL by
its media type and data (another shape splits them). What is structure rather than data
is not checked: `type` and `role` tags (each shape has its own), false flags and empty
strings (the defaults), and the parts a converter already reported by their kind.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ctxstore.domain.messages import Message

JSON = dict[str, Any]
STRUCTURE = ("type", "role")
LIMIT = 12  # paths named per message (the rest are counted)


@dataclass
class Conversion:
    """A context in one shape, and what could not be carried over (id, what, why)."""

    shape: str
    payload: Any
    omitted: list[JSON] = field(default_factory=list)
    legacy: dict[str, str] = field(default_factory=dict)  # function name -> its call's id
    _reported: dict[str | None, set[str]] = field(default_factory=dict, repr=False)

    def omit(self, message: Message, what: str, why: str) -> None:
        self.omitted.append({"id": message.id, "what": what, "why": why})
        self._reported.setdefault(message.id, set()).add(what)

    def check(self, message: Message, source: Any, converted: Any) -> None:
        """Name what of `source` (one message, in its own shape) the conversion did not
        carry and did not report already (conversion_losses.py)."""
        lost = missing(source, converted, self._reported.get(message.id, set()))
        if lost:
            self.omit(message, describe(lost), f"no field of {self.shape} carries it")


def missing(source: Any, converted: Any, reported: set[str]) -> list[str]:
    """Paths of the values of `source` not found in `converted` (see the module); what is
    under a path in `reported`, or in a part whose `type` is in it, is skipped."""
    texts: list[str] = []
    flags: set[tuple[str, Any]] = set()
    for key, value in _values(converted, ""):
        if isinstance(value, str):
            texts.append(value)
        else:
            flags.add((key, value))
            texts.append(json.dumps(value))
    haystack = "\x00".join(texts)
    if not reported and all(
        _carried(key, value, haystack, flags) for key, value in _values(source, "", expand=True)
    ):
        return []  # the common case, found without building a path
    lost: list[str] = []
    for path, value in _leaves(source, "", reported, expand=True):
        if any(path == r or path.startswith((r + ".", r + "[")) for r in reported):
            continue
        if not _carried(_key(path), value, haystack, flags):
            lost.append(path)
    return lost


def _carried(key: str, value: Any, haystack: str, flags: set[tuple[str, Any]]) -> bool:
    if isinstance(value, bool):
        return not value or (key, True) in flags
    if isinstance(value, int | float):
        return (key, value) in flags or json.dumps(value) in haystack
    return not value or value in haystack


def _values(value: Any, key: str, *, expand: bool = False) -> Iterator[tuple[str, Any]]:
    """(field name, value) of each value inside `value`, as _leaves walks them."""
    if isinstance(value, dict):
        for k, item in value.items():
            if k in STRUCTURE and isinstance(item, str):
                continue
            yield from _values(item, k, expand=expand)
    elif isinstance(value, list):
        for item in value:
            yield from _values(item, key, expand=expand)
    elif isinstance(value, str):
        inner = _inside(value) if expand else None
        if inner is None:
            yield key, value
        else:
            yield from _values(inner, key, expand=expand)
    elif value is not None:
        yield key, value


def describe(paths: list[str]) -> str:
    shown = ", ".join(paths[:LIMIT])
    more = len(paths) - LIMIT
    return shown + (f" and {more} more" if more > 0 else "")


def _key(path: str) -> str:
    return path.rsplit(".", 1)[-1].split("[", 1)[0]


def _leaves(
    value: Any, path: str, skip: set[str] | None = None, *, expand: bool = False
) -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        if skip and value.get("type") in skip:
            return
        for key, item in value.items():
            if key in STRUCTURE and isinstance(item, str):
                continue
            yield from _leaves(item, f"{path}.{key}" if path else str(key), skip, expand=expand)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _leaves(item, f"{path}[{i}]", skip, expand=expand)
    elif isinstance(value, str) and expand:
        inner = _inside(value)
        if inner is None:
            yield path, value
        else:
            yield from _leaves(inner, path, skip, expand=expand)
    elif value is not None:
        yield path, value


def _inside(text: str) -> Any:
    """The values a string holds when another shape may carry them apart: a JSON object or
    array's, a data URL's media type and data; None for a plain string."""
    if text.startswith("data:") and ";base64," in text:
        media, data = text[5:].split(";base64,", 1)
        return [media, data]
    if text[:1] in "{[":
        try:
            found = json.loads(text)
        except ValueError:
            return None
        return found if isinstance(found, dict | list) else None
    return None
