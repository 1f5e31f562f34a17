"""json_copy: the copy a reader gets of a stored message equals copy.deepcopy's and shares
nothing with what the store holds, for every plain JSON value (integers past 64 bits
included, which orjson will not write)."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ctxstore.domain.json_values import json_copy

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)


@given(JSON)
def test_a_copy_equals_deepcopys_and_shares_nothing(value: Any) -> None:
    copied = json_copy(value)
    assert copied == copy.deepcopy(value)
    assert _types(copied) == _types(value)  # (True stays True, 1.0 stays a float)
    wrapper = {"v": value}
    mutable = json_copy(wrapper)
    mutable["v"] = "changed"
    assert wrapper == {"v": value}
    if isinstance(value, dict | list) and value:
        assert _ids(copied).isdisjoint(_ids(value))


def _types(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _types(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_types(v) for v in value]
    return type(value)


def _ids(value: Any) -> set[int]:
    """The ids of the containers inside a value (what a copy must not share)."""
    found = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            found.add(id(item))
            stack.extend(item.values())
        elif isinstance(item, list):
            found.add(id(item))
            stack.extend(item)
    return found
