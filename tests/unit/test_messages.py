"""The message model: the OpenAI chat shape, refused clearly when malformed."""

import pytest

from ctxstore.domain.errors import InvalidMessageError
from ctxstore.domain.messages import Message, parse_message


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
        ({"role": "assistant"}, "needs content, tool_calls or refusal"),
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
        ({"role": "user", "content": "x", "colour": "red"}, "colour"),
        ({"role": "user", "content": [{"type": "text"}]}, "text"),
        ({"role": "user", "content": 5}, "content"),
        ("just text", "JSON object"),
    ],
)
def test_malformed_messages_are_refused_naming_the_problem(raw, names):
    with pytest.raises(InvalidMessageError) as info:
        parse_message(raw)
    assert names in str(info.value)
