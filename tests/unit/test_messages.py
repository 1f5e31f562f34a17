"""The message model: the OpenAI chat shape, refused clearly when malformed."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxstore.domain.errors import InvalidMessageError
from ctxstore.domain.json_values import MAX_DEPTH, json_problem, json_size_bound
from ctxstore.domain.message_input import parse_message
from ctxstore.domain.messages import Message

from ..conftest import examples


def test_every_role_and_shape_round_trips():
    msgs = [
        {"role": "system", "content": "be brief"},
        {"role": "developer", "content": "internal rules", "name": "ops"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "42"},
        {"role": "assistant", "refusal": "I can't"},
        {"role": "assistant", "content": None, "audio": {"id": "audio_1"}},  # a spoken reply
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "k1", "type": "custom", "custom": {"name": "patch", "input": "+a\n-b"}},
                {"id": "f1", "function": {"name": "ls"}},
            ],
        },
        {"role": "user", "content": "hi", "metadata": {"source": "web", "n": [1, 2]}},
    ]
    for raw in msgs:
        m = parse_message(raw)
        again = Message.model_validate(m.model_dump(mode="json"))
        assert again == m
    image = parse_message(msgs[2])
    assert image.to_openai()["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "https://x/y.png"},
    }
    assert image.text() == "look"
    spoken = parse_message(msgs[6])
    assert spoken.to_openai() == {"role": "assistant", "audio": {"id": "audio_1"}}
    assert spoken.text() == ""
    calls = parse_message(msgs[7])
    assert calls.to_openai()["tool_calls"] == [
        {"id": "k1", "type": "custom", "custom": {"name": "patch", "input": "+a\n-b"}},
        {"id": "f1", "type": "function", "function": {"name": "ls", "arguments": ""}},
    ]
    assert [(c.tool_name, c.tool_input) for c in calls.tool_calls or []] == [
        ("patch", "+a\n-b"),
        ("ls", ""),
    ]
    assert calls.call_ids == ["k1", "f1"]


@pytest.mark.parametrize(
    ("raw", "names"),
    [
        ({"role": "wizard", "content": "x"}, "role"),
        ({"role": "user"}, "needs content"),
        ({"role": "tool", "content": "x"}, "tool_call_id"),
        ({"role": "user", "content": "x", "tool_call_id": "c"}, "only tool messages"),
        (
            {
                "role": "user",
                "content": "x",
                "tool_calls": [{"id": "c", "function": {"name": "f"}}],
            },
            "only assistant",
        ),
        ({"role": "assistant"}, "needs content, tool_calls, function_call, refusal or audio"),
        (
            {"role": "user", "content": "x", "audio": {"id": "a"}},
            "only assistant messages carry audio",
        ),
        ({"role": "assistant", "audio": {"id": "a", "data": float("inf")}}, "audio"),
        ({"role": "assistant", "audio": {"id": ""}}, "audio.id"),
        (
            {
                "role": "assistant",
                "tool_calls": [{"id": "c", "type": "mcp", "function": {"name": "f"}}],
            },
            "tool_calls.0: a tool call's type is 'function' (the default) or 'custom'",
        ),
        (
            {
                "role": "assistant",
                "tool_calls": [{"id": "c", "type": "custom", "custom": {"name": "f"}}],
            },
            "tool_calls.0.custom.input: Field required",
        ),
        (
            {
                "role": "assistant",
                "tool_calls": [{"id": "c", "type": "custom", "function": {"name": "f"}}],
            },
            "tool_calls.0.custom: Field required",
        ),
        ({"role": "assistant", "tool_calls": []}, "must not be empty"),
        (
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": "c", "function": {"name": "f"}},
                    {"id": "c", "function": {"name": "g"}},
                ],
            },
            "duplicate",
        ),
        ({"role": "user", "content": "x", "colour": float("nan")}, "colour"),
        ({"role": "user", "content": [{"type": "text"}]}, "text"),
        ({"role": "user", "content": [{"type": "x", "v": float("nan")}]}, "finite number"),
        ({"role": "user", "content": [{"type": "x", "v": [1, float("inf")]}]}, "finite number"),
        ({"role": "user", "content": 5}, "content"),
        ("just text", "JSON object"),
    ],
)
def test_malformed_messages_are_refused_naming_the_problem(raw, names):
    with pytest.raises(InvalidMessageError) as info:
        parse_message(raw)
    assert names in str(info.value)


# ---- the JSON checks every stored message passes ------------------------------------------

_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=20)
    # any code point, lone surrogates too (they are what json_problem refuses)
    | st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=20)
)
_keys = st.text(max_size=8) | st.integers() | st.none() | st.booleans()  # json.dumps takes these
_json_like = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(_keys, inner, max_size=4)
    ),
    max_leaves=30,
)


def _slow_problem(value: object) -> bool:
    """Whether the value is unstorable, judged the plain recursive way."""

    def walk(item: object, depth: int) -> bool:
        if depth > MAX_DEPTH:
            return True
        if isinstance(item, str):
            return any(0xD800 <= ord(c) <= 0xDFFF for c in item)
        if isinstance(item, dict):
            return any(walk(k, depth + 1) or walk(v, depth + 1) for k, v in item.items())
        if isinstance(item, list | tuple):
            return any(walk(v, depth + 1) for v in item)
        return False

    return walk(value, 0)


@settings(max_examples=examples(400), deadline=None)
@given(_json_like)
def test_json_size_bound_is_never_below_the_encoded_size(value):
    bound = json_size_bound(value)
    assert bound is not None
    exact = len(json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    assert exact <= bound


@settings(max_examples=examples(400), deadline=None)
@given(_json_like)
def test_json_problem_refuses_exactly_lone_surrogates_and_depth(value):
    problem = json_problem(value)
    assert (problem is not None) == _slow_problem(value)


def test_json_checks_name_where_and_stop_on_cycles():
    assert (
        json_problem({"a": [{"b": "ok"}, "\ud800"]}) == "a[1]: not valid Unicode (a lone surrogate)"
    )
    deep: list[object] = []
    cur = deep
    for _ in range(MAX_DEPTH + 1):
        cur.append([])
        cur = cur[0]
    assert json_size_bound(deep) is None
    assert "nested deeper than" in (json_problem(deep) or "")
    cyclic: dict[str, object] = {}
    cyclic["self"] = cyclic
    assert json_size_bound(cyclic) is None
    assert json_problem(cyclic) is not None
    assert json_size_bound({"x": object()}) is None  # not JSON: only encoding tells its size
