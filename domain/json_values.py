"""Checks of plain JSON values before they are stored: nesting, valid Unicode, a size bound
found without encoding. Every walk is iterative, so no input can exhaust the stack."""

from __future__ import annotations

import copy
from typing import Any

import orjson

MAX_DEPTH = 64  # JSON nested deeper than this is refused, not recursed into


def json_copy(value: Any) -> Any:
    """A deep copy of a plain JSON value (a stored message), through orjson: a tenth of
    copy.deepcopy's time. What orjson will not write (an integer past 64 bits) is copied by
    deepcopy instead; a stored value holds no NaN, no lone surrogate and only string keys,
    so the two copies are equal."""
    try:
        return orjson.loads(orjson.dumps(value))
    except (orjson.JSONEncodeError, TypeError):
        return copy.deepcopy(value)


def json_problem(value: Any) -> str | None:
    """What makes a JSON value unstorable (too deep; a string that is not valid Unicode),
    or None. Walks iteratively, so no input can exhaust the stack."""
    if _storable(value):
        return None
    return _locate_problem(value)


def _storable(value: Any) -> bool:
    """json_problem's common case, without keeping the path it would name. Walked a level
    at a time: a list a level, not a tuple a node (each tracked object allocated counts
    towards the interpreter's next garbage collection)."""
    level, depth = [value], 0
    while level:
        if depth > MAX_DEPTH:
            return False
        below: list[Any] = []
        for item in level:
            if isinstance(item, str):
                if not item.isascii():
                    try:
                        item.encode("utf-8")
                    except UnicodeEncodeError:
                        return False
            elif isinstance(item, dict):
                below.extend(item)
                below.extend(item.values())
            elif isinstance(item, list | tuple):
                below.extend(item)
        level, depth = below, depth + 1
    return True


def _locate_problem(value: Any) -> str | None:
    """The problem json_problem names, with where it is (a second, slower walk)."""
    stack: list[tuple[Any, int, str]] = [(value, 0, "")]
    while stack:
        item, depth, where = stack.pop()
        if depth > MAX_DEPTH:
            return f"{_short(where)}: nested deeper than {MAX_DEPTH} levels"
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return f"{_short(where)}: not valid Unicode (a lone surrogate)"
        elif isinstance(item, dict):
            for k, v in item.items():
                stack.append((k, depth + 1, f"{where}.key" if where else "key"))
                stack.append((v, depth + 1, f"{where}.{k}" if where else str(k)))
        elif isinstance(item, list | tuple):
            stack.extend((v, depth + 1, f"{where}[{i}]") for i, v in enumerate(item))
    return None


def json_size_bound(value: Any) -> int | None:
    """An upper bound of the UTF-8 size of `json.dumps(value, ensure_ascii=False)`, found
    without encoding: each string counts 6 bytes a character (an escape such as \\u001f is
    the longest a character becomes). None when the value holds something that is not JSON
    or nests deeper than MAX_DEPTH (a cycle does): only encoding it tells. Walked a level
    at a time, as _storable."""
    total = 0
    level, depth = [value], 0
    while level:
        below: list[Any] = []
        for item in level:
            if isinstance(item, str):
                total += 6 * len(item) + 2
            elif isinstance(item, bool) or item is None:
                total += 5
            elif isinstance(item, int):
                total += item.bit_length() // 3 + 3  # decimal digits and a sign, at most
            elif isinstance(item, float):
                total += 24  # the longest repr, e.g. -2.2250738585072014e-308
            elif depth >= MAX_DEPTH:
                return None
            elif isinstance(item, dict):
                total += 2 + 6 * len(item)  # braces; per member ": ", ", " and a key's quotes
                below.extend(item)
                below.extend(item.values())
            elif isinstance(item, list | tuple):
                total += 2 + 2 * len(item)
                below.extend(item)
            else:
                return None
        level, depth = below, depth + 1
    return total


def _short(where: str) -> str:
    return (where[:40] + "..." + where[-20:] if len(where) > 64 else where) or "value"


__all__ = ["MAX_DEPTH", "json_problem", "json_size_bound"]
