"""Random operation sequences on the aggregate, checked against a plain reference model."""

from typing import cast

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ctxstore.domain.context import Context
from ctxstore.domain.errors import CtxStoreError
from ctxstore.domain.messages import Message
from ctxstore.domain.summaries import covered_entries
from ctxstore.domain.tokens import ESTIMATE, message_tokens
from ctxstore.projections.history import fold_history
from ctxstore.projections.visible import replay, visible_of

from ..conftest import examples


def normal(items):
    return [(i, Message.model_validate(m).model_dump(mode="json")) for i, m in items]


def apply(ctx: Context, op: tuple) -> None:
    kind = op[0]
    if kind == "insert":
        ctx.insert(op[1], after=op[2], actor="p")
    elif kind == "delete":
        ctx.delete(op[1], actor="p")
    elif kind == "replace":
        ctx.replace(op[1], op[2], actor="p")
    elif kind == "compress":
        ctx.compress(op[1], op[2], actor="p")
    elif kind == "expand":
        # The store reads what a summary covers from the stored history; here, from the
        # aggregate's own events replayed up to a version.
        def state_at(_: object, version: int) -> Context:
            return replay(cast(list[Context.Event], ctx.pending_events[:version]))

        found = ctx.resolve(op[1])
        ctx.expand(found, covered_entries(ctx.id, ctx, found, state_at), actor="p")
    elif kind == "batch_start":
        ctx.batch_start(actor="p")
    else:
        ctx.batch_end(to=op[1], keep=op[2], actor="p")


@settings(
    max_examples=examples(300),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_random_sequences_match_the_reference_model(data, reference_model, draw_operation):
    model = reference_model()
    ctx = Context.start(name=None, metadata={}, actor="p")
    counter = [0]
    opened: list[tuple[int, list]] = []  # (version of the batch_start, visible before it)
    for _ in range(data.draw(st.integers(1, 40))):
        op = draw_operation(data, model, counter)
        before = (ctx.version, visible_of(ctx))
        expected_error = model.apply(op)
        event(f"{op[0]}: {expected_error or 'ok'}")
        try:
            apply(ctx, op)
        except CtxStoreError as exc:
            assert type(exc).__name__ == expected_error, (op, exc)
            assert (ctx.version, visible_of(ctx)) == before, "a refused command changed state"
        else:
            assert expected_error is None, (op, expected_error)
        got = [(m.id, m.model_dump(mode="json")) for m in ctx.visible_messages()]
        assert got == normal(model.items), op
        assert ctx.batch == model.batch
        # The running token total is the sum of the visible messages' counts.
        assert ctx.tokens == sum(message_tokens(m, ESTIMATE) for _, m in got)
        assert ctx.estimated == len(got)
        if op[0] == "batch_start" and expected_error is None:
            opened.append((ctx.version, got))
        if op[0] == "batch_end" and expected_error is None:
            kept = op[2]
            if not kept:
                # Rollback restores exactly the visible context of the moment the batch opened.
                assert got == opened[op[1]][1]
            del opened[op[1] :]
    events = list(ctx.collect_events())
    assert visible_of(replay(events)) == visible_of(ctx)  # replay == incremental
    hist = fold_history(events)
    assert [h.version for h in hist] == list(range(1, ctx.version + 1))
