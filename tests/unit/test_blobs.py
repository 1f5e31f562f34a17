"""Lifting payloads out of messages and putting them back: the identity, for any JSON."""

from __future__ import annotations

import base64
import copy
import hashlib
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ctxstore.domain.blobs import DATA_URL_KEYS, BlobRef, has_references, inline, lift, parse_ref

payload = st.binary(min_size=0, max_size=3000)
media = st.sampled_from(["image/png", "image/jpeg", "audio/wav", "application/pdf"])


@st.composite
def data_url(draw: Any) -> str:
    return f"data:{draw(media)};base64," + base64.b64encode(draw(payload)).decode()


leaf = st.one_of(st.text(max_size=20), st.integers(), st.none(), data_url())
keys = st.one_of(
    st.sampled_from(sorted(DATA_URL_KEYS | {"data", "text", "content"})), st.text(max_size=8)
)
tree = st.recursive(
    leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(keys, inner, max_size=4),
        st.builds(
            lambda b, m: {"type": "base64", "media_type": m, "data": base64.b64encode(b).decode()},
            payload,
            media,
        ),
        st.builds(
            lambda b: {"input_audio": {"data": base64.b64encode(b).decode(), "format": "wav"}},
            payload,
        ),
    ),
    max_leaves=12,
)


@given(st.dictionaries(keys, tree, max_size=4))
def test_lifting_then_inlining_gives_the_message_back(message: dict[str, Any]) -> None:
    original = copy.deepcopy(message)
    blobs = lift(message)
    stored = {b.ref.sha256: b.data for b in blobs}
    for b in blobs:
        assert hashlib.sha256(b.data).hexdigest() == b.ref.sha256 and len(b.data) >= 1024
    assert has_references(message) == bool(blobs)
    assert inline(message, lambda ref: stored[ref.sha256]) == original


def test_a_reference_parses_back_to_what_it_says() -> None:
    ref = BlobRef("a" * 64, "image/svg+xml", 12, 3, 4, "base64")
    assert parse_ref(ref.uri()) == ref
