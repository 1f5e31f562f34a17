"""The stored JSON: orjson writes what the standard encoder wrote, and reads back alike."""

import json
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxstore.adapters.storage.codec.transcoder import ContextTranscoder

transcoder = ContextTranscoder()
scalars = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text()
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)
floats = st.floats(allow_nan=False, allow_infinity=False)


@given(st.dictionaries(st.text(), values, max_size=6))
def test_without_floats_the_bytes_are_the_standard_encoders(state):
    assert transcoder.encode(state) == transcoder.encode_standard(state)


@given(st.lists(floats | values, max_size=8))
def test_floats_read_back_as_the_same_numbers(state):
    assert json.loads(transcoder.encode(state)) == json.loads(transcoder.encode_standard(state))


def test_the_librarys_datetimes_keep_their_tag():
    when = datetime(2026, 11, 23, 12, 0, 1, 5, tzinfo=UTC)
    state = {"timestamp": when, "n": 1}
    assert transcoder.encode(state) == transcoder.encode_standard(state)
    assert transcoder.decode(transcoder.encode(state))["timestamp"] == when


@pytest.mark.parametrize(
    "state",
    [{"big": 2**64}, {"n": -(2**70)}, {1: "int key"}, {"deep": json.loads("[" * 300 + "]" * 300)}],
)
def test_what_orjson_refuses_is_written_by_the_standard_encoder(state):
    assert transcoder.encode(state) == transcoder.encode_standard(state)


def test_what_is_not_json_is_refused_as_before():
    for bad in ({"s": {1, 2}}, {"o": object()}, {"lone": "\ud800"}):
        with pytest.raises((TypeError, ValueError)):
            transcoder.encode_standard(bad)
        with pytest.raises((TypeError, ValueError)):
            transcoder.encode(bad)
