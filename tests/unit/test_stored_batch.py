"""stored_batch: the stored form of each message of an insert, checked by hand where it can
be, is exactly what the model's validation and dump give, and refuses exactly alike."""

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxstore.domain.errors import CtxStoreError
from ctxstore.domain.message_input import parse_batch, stored_batch
from ctxstore.domain.messages import MAX_ID
from ctxstore.domain.shapes.detection import by_marks, detect

from ..conftest import examples

LEAF = st.one_of(
    st.none(), st.booleans(), st.integers(), st.text(max_size=8),
    st.floats(allow_nan=True, allow_infinity=True), st.just(math.nan),
)  # fmt: skip
JSONISH = st.recursive(
    LEAF,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.one_of(st.text(max_size=4), st.integers()), inner, max_size=3)
    ),
    max_leaves=8,
)
ID = st.one_of(
    st.text(min_size=0, max_size=3), st.text(min_size=MAX_ID, max_size=MAX_ID + 1), st.integers()
)
CHAT = st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "developer", "user", "assistant", "tool", "x", 3])},
    optional={
        "content": st.one_of(st.text(max_size=20), st.none(), JSONISH),
        "id": ID,
        "name": st.one_of(st.text(max_size=5), st.none(), st.integers()),
        "metadata": st.one_of(JSONISH, st.dictionaries(st.text(max_size=4), JSONISH, max_size=3)),
        "tool_call_id": st.text(max_size=3),
        "refusal": st.text(max_size=3),
        "extra": JSONISH,
    },
)
TEXT = st.text(max_size=20)
NATIVE = st.one_of(
    st.fixed_dictionaries(  # a Responses message item
        {
            "type": st.just("message"),
            "role": st.sampled_from(["user", "assistant", "system"]),
            "content": st.lists(
                st.fixed_dictionaries({"type": st.just("output_text"), "text": TEXT}), max_size=2
            ),
        },
        optional={"id": st.text(max_size=5), "status": st.just("completed"), "extra": JSONISH},
    ),
    st.fixed_dictionaries(  # an Anthropic message
        {
            "role": st.sampled_from(["user", "assistant"]),
            "content": st.lists(
                st.fixed_dictionaries(
                    {"type": st.just("text"), "text": TEXT},
                    optional={"cache_control": st.just({"type": "ephemeral"}), "x": JSONISH},
                ),
                min_size=1,
                max_size=2,
            ),
        }
    ),
)

GIVEN = st.builds(
    lambda payload, format, role, extra: {
        "role": role or payload["role"],
        "format": format,
        "native": payload,
        **extra,
    },
    NATIVE,
    st.sampled_from(["openai-responses", "anthropic", "gemini", "openai-chat", "x"]),
    st.sampled_from([None, None, "user", "tool", 5]),
    st.fixed_dictionaries(
        {}, optional={"id": ID, "metadata": st.one_of(JSONISH, st.just({})), "content": TEXT}
    ),
)  # the stored form, as visible contexts return it and the SDK sessions write it


def outcome(read):
    try:
        return read()
    except CtxStoreError as exc:
        return type(exc), str(exc)


def same(messages, shape=None):
    fast = outcome(lambda: stored_batch(messages, shape))
    slow = outcome(lambda: [m.stored() for m in parse_batch(messages, shape)])
    assert repr(fast) == repr(slow)  # (repr: key order counts, and a NaN equals itself)
    return fast


@settings(max_examples=examples(500), deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.one_of(CHAT, NATIVE, GIVEN), min_size=1, max_size=3))
def test_the_stored_form_is_the_models_and_so_is_every_refusal(messages):
    same(messages)


@settings(max_examples=examples(100), deadline=None, suppress_health_check=list(HealthCheck))
@given(CHAT, st.sampled_from(["openai-chat", "openai-responses", "anthropic", "gemini", "x"]))
def test_a_named_shape_reads_alike(message, shape):
    same([message], shape)


def test_plain_messages_are_stored_by_hand_key_for_key():
    given_id = {"id": "m1", "role": "user", "content": "hi", "metadata": {"k": [1, 2.5]}}
    assert same([given_id]) == [given_id]
    assert same({"content": "yo", "role": "assistant"}) == [
        {"role": "assistant", "content": "yo", "id": None}
    ]
    metadata = {"k": [1]}
    (held,) = stored_batch({"role": "user", "content": "x", "metadata": metadata})
    assert held["metadata"] == metadata and held["metadata"] is not metadata  # a copy


def test_refusals_name_the_same_problem():
    for bad in (
        {"role": "user", "content": "x", "id": ""},
        {"role": "user", "content": "x", "id": "i" * (MAX_ID + 1)},
        {"role": "user", "content": "x", "metadata": {"f": math.inf}},
        {"role": "tool", "content": "x"},
        {"role": "user", "content": "\ud800"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text",
                                                             "text": "t", "n": math.nan}]},
    ):  # fmt: skip
        kind, _ = same([bad])
        assert issubclass(kind, CtxStoreError)


def test_the_stored_form_is_read_back_key_for_key():
    item = {"type": "message", "role": "assistant", "content": [{"type": "output_text",
                                                              "text": "hi"}]}  # fmt: skip
    given = {"role": "assistant", "format": "openai-responses", "native": item, "id": "m1"}
    (held,) = same([given])
    assert held == {**given, "metadata": {}} and next(iter(held)) == "id"


def test_a_plain_message_takes_its_batchs_native_shape():
    anthropic = {"role": "assistant", "content": [{"type": "thinking", "thinking": "t",
                                                   "signature": "s"}]}  # fmt: skip
    stored = same([{"role": "user", "content": "hi"}, anthropic])
    assert [m["format"] for m in stored] == ["anthropic", "anthropic"]


@settings(max_examples=examples(300), deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.dictionaries(
        st.sampled_from(["role", "content", "name", "id", "metadata", "parts", "type"]),
        st.one_of(st.text(max_size=5), st.sampled_from(["user", "model", "assistant"]), JSONISH),
        max_size=5,
    )
)
def test_detections_shortcut_agrees_with_every_shapes_marks(message):
    assert outcome(lambda: detect(message)) == outcome(lambda: by_marks(message))
