"""Random operation sequences over Responses items and Anthropic messages, checked against a
plain reference model of each shape's pairing rules: what the aggregate accepts, refuses,
and what it reads back (exactly the payloads, in order)."""

from __future__ import annotations

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ctxstore.domain.context import Context
from ctxstore.domain.conversions import convert
from ctxstore.domain.errors import CtxStoreError
from ctxstore.projections.visible import replay, visible_of

from ..conftest import examples


class Model:
    """A transcript of abstract messages: (id, kind, calls, answers)."""

    def __init__(self, shape: str) -> None:
        self.shape = shape
        self.items: list[tuple[str, str, tuple[str, ...], tuple[str, ...], dict]] = []

    def well_formed(self, items: list) -> bool:
        pending: list[str] = []
        for _, kind, calls, answers, _ in items:
            if answers:
                if not pending or any(a not in pending for a in answers):
                    return False
                if self.shape == "anthropic" and set(answers) != set(pending):
                    return False
                pending = [p for p in pending if p not in answers]
                continue
            if pending:
                if self.shape == "openai-responses" and kind in ("call", "reasoning"):
                    pending += list(calls)
                    continue
                return False
            pending = list(calls)
        return True

    def blocks(self) -> list[set[str]]:
        """Ids that go together: a call with its results (a Responses turn's further calls),
        a reasoning item with the item after it."""
        groups: list[set[str]] = []
        current: set[str] | None = None
        pending: set[str] = set()
        reasoning: list[str] = []
        for msg_id, kind, calls, answers, _ in self.items:
            if answers and current is not None:
                current.add(msg_id)
                pending -= set(answers)
                continue
            if (
                current is not None
                and pending
                and self.shape == "openai-responses"
                and kind in ("call", "reasoning")
            ):
                current.add(msg_id)
                pending |= set(calls)
                continue
            if kind == "reasoning":
                reasoning.append(msg_id)
                current, pending = None, set()
                continue
            if calls or reasoning:
                group = {msg_id, *reasoning}
                groups.append(group)
                current, pending = (group, set(calls)) if calls else (None, set())
            else:
                current, pending = None, set()
            reasoning = []
        if reasoning:
            groups.append(set(reasoning))
        return groups


def render(shape: str, kind: str, msg_id: str, calls: tuple, answers: tuple) -> dict:
    """An abstract message in a shape (each payload distinct by its text)."""
    if shape == "openai-responses":
        if kind == "reasoning":
            return {"type": "reasoning", "id": f"rs_{msg_id}",
                    "summary": [{"type": "summary_text", "text": msg_id}]}  # fmt: skip
        if kind == "call":
            return {"type": "function_call", "call_id": calls[0], "name": "f",
                    "arguments": f'{{"n": "{msg_id}"}}'}  # fmt: skip
        if kind == "result":
            return {"type": "function_call_output", "call_id": answers[0], "output": msg_id}
        role = "user" if kind == "user" else "assistant"
        return {"type": "message", "role": role, "content": msg_id}
    if kind == "call":
        return {"role": "assistant", "content": [
            {"type": "thinking", "thinking": msg_id, "signature": "s"},
            *({"type": "tool_use", "id": c, "name": "f", "input": {"n": msg_id}} for c in calls)]}  # fmt: skip
    if kind == "result":
        return {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": a, "content": msg_id} for a in answers]}  # fmt: skip
    role = "user" if kind == "user" else "assistant"
    return {"role": role, "content": [{"type": "text", "text": msg_id}]}


def draw_message(data, model: Model, counter: list[int]) -> tuple:
    counter[0] += 1
    msg_id = f"m{counter[0]}"
    kinds = ["user", "assistant", "call", "result"]
    if model.shape == "openai-responses":
        kinds.append("reasoning")
    kind = data.draw(st.sampled_from(kinds))
    calls: tuple[str, ...] = ()
    answers: tuple[str, ...] = ()
    if kind == "call":
        n = 1 if model.shape == "openai-responses" else data.draw(st.integers(1, 2))
        calls = tuple(f"c{counter[0]}_{i}" for i in range(n))
    if kind == "result":
        known = [c for _, _, cs, _, _ in model.items for c in cs] or ["nope"]
        if model.shape == "anthropic" and data.draw(st.booleans()):
            last = [cs for _, k, cs, _, _ in model.items if k == "call"]
            answers = last[-1] if last else ("nope",)
        else:
            answers = (data.draw(st.sampled_from(known)),)
    payload = render(model.shape, kind, msg_id, calls, answers)
    return (msg_id, kind, calls, answers, payload)


@settings(max_examples=examples(200), deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), shape=st.sampled_from(["openai-responses", "anthropic"]))
def test_native_sequences_match_the_reference_model(data, shape):
    model = Model(shape)
    ctx = Context.start(name=None, metadata={}, actor="p")
    counter = [0]
    for _ in range(data.draw(st.integers(1, 30))):
        if model.items and data.draw(st.integers(0, 4)) == 0:
            start = data.draw(st.integers(0, len(model.items) - 1))
            chosen = [i[0] for i in model.items[start : start + data.draw(st.integers(1, 3))]]
            splits = any(0 < len(g & set(chosen)) < len(g) for g in model.blocks())
            rest = [i for i in model.items if i[0] not in chosen]
            expected_ok = not splits and model.well_formed(rest)
            event(f"{shape} delete: {'ok' if expected_ok else 'refused'}")
            try:
                ctx.delete(chosen, actor="p")
            except CtxStoreError:
                assert not expected_ok, ("delete refused", chosen)
            else:
                assert expected_ok, ("delete accepted", chosen, model.items)
                model.items = rest
        else:
            item = draw_message(data, model, counter)
            expected_ok = model.well_formed([*model.items, item])
            event(f"{shape} insert {item[1]}: {'ok' if expected_ok else 'refused'}")
            try:
                ctx.insert({"id": item[0], "format": shape, "native": item[4],
                            "role": _role(shape, item)}, actor="p")  # fmt: skip
            except CtxStoreError:
                assert not expected_ok, ("insert refused", item, model.items)
            else:
                assert expected_ok, ("insert accepted", item, model.items)
                model.items.append(item)
        visible = ctx.visible_messages()
        assert [m.native for m in visible] == [i[4] for i in model.items]
        if shape == "openai-responses":
            assert convert(visible, shape).payload == [i[4] for i in model.items]
        else:
            assert convert(visible, shape).payload["messages"] == [i[4] for i in model.items]
    events = list(ctx.collect_events())
    assert visible_of(replay(events)) == visible_of(ctx)


def _role(shape: str, item: tuple) -> str:
    kind = item[1]
    if kind == "result":
        return "tool"
    return "user" if kind == "user" else "assistant"
