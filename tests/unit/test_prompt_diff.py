"""The prompt diff between two calls against a plain model: every message of both prompts
is accounted for exactly once, and what the diff says is there is there."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxstore.domain.messages import Message
from ctxstore.projections.calls import ModelCall, prompt_diff

from ..conftest import examples

CID = uuid4()
ROLES = ("system", "user", "assistant")


def call(number: int, messages: list[Message]) -> ModelCall:
    return ModelCall(
        number=number, context_id=CID, version=number, for_version=number,
        timestamp=datetime.now(UTC), actor="t", model="m", prompt_tokens=0,
        completion_tokens=0, counted_tokens=len(messages), estimated=False,
        whole_context=False, messages=messages,
    )  # fmt: skip


messages = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "c", "d", "e", None]),  # ids; None: a request's own
        st.sampled_from(ROLES),
        st.sampled_from(["x", "y", "z"]),
    ),
    max_size=8,
).map(
    lambda rows: [
        Message.model_validate({"role": r, "content": t} | ({"id": i} if i else {}))
        for i, r, t in rows
    ]
)


@settings(max_examples=examples(300), deadline=None)
@given(before=messages, after=messages)
def test_every_message_is_accounted_for_once(before, after):
    d = prompt_diff(call(2, after), call(1, before))
    # Each message this call sent is added, changed or unchanged; each the previous one
    # sent is removed, or matched (changed or unchanged) one for one.
    assert len(d.added) + len(d.changed) + d.unchanged == len(after)
    assert len(d.removed) + len(d.changed) + d.unchanged == len(before)
    sent_now = [(m.id or "", m.role) for m in after]
    sent_before = [(m.id or "", m.role) for m in before]
    for m in d.added + d.changed:
        assert (m.id, m.role) in sent_now
    for m in d.removed:
        assert (m.id, m.role) in sent_before
    if [m.stored() for m in before] == [m.stored() for m in after]:
        assert not (d.added or d.removed or d.changed) and d.unchanged == len(after)


def test_an_edited_message_is_changed_and_the_first_call_adds_all():
    system = Message.model_validate({"role": "system", "content": "be terse", "id": "s"})
    edited = Message.model_validate({"role": "system", "content": "be kind", "id": "s"})
    question = Message.model_validate({"role": "user", "content": "q", "id": "u"})
    d = prompt_diff(call(2, [edited, question]), call(1, [system, question]))
    assert [m.preview for m in d.changed] == ["be kind"] and d.unchanged == 1
    assert not d.added and not d.removed
    first = prompt_diff(call(1, [system, question]), None)
    assert first.previous is None and [m.id for m in first.added] == ["s", "u"]
    assert first.tokens_before == 0 and first.tokens_after == 2
