"""Hostile input to the facade: no crash, only typed errors, and nothing written on error.

Random commands with huge contents, deep JSON, lone surrogates (not valid UTF-8), wrong
types, unknown fields, negative or enormous versions and ids from another context. Every
call either succeeds or raises a CtxStoreError; a refused command leaves the context at its
version; at the end the projection still equals a replay of the events. (The HTTP API gets
the same treatment from schemathesis in tests/service/test_api_fuzz.py.)
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxstore import CtxStoreError, InvalidMessageError, InvalidOperationError
from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(depth):
        value = {"a": value}
    return value


scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(), st.text(max_size=12),
    st.sampled_from(["\ud800", "x\udcffy", "\x00", "🙂", "上海"]),
)  # fmt: skip
json_like = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)
roles = st.sampled_from(["user", "assistant", "system", "developer", "tool", "robot", "", 5])
messages = st.one_of(
    st.fixed_dictionaries({"role": roles, "content": json_like}),
    st.fixed_dictionaries(
        {"role": st.just("user"), "content": st.text(max_size=20)},
        optional={
            "metadata": json_like,
            "surprise": json_like,
            "id": json_like,
            "tool_call_id": json_like,
            "tool_calls": json_like,
            "name": json_like,
        },
    ),
    st.builds(lambda n: {"role": "user", "content": "x" * n}, st.integers(999_000, 1_001_000)),
    st.builds(
        lambda d: {"role": "user", "content": "deep", "metadata": nested(d)}, st.integers(60, 400)
    ),
    json_like,
)
versions = st.one_of(st.none(), st.integers(-(2**64), 2**64), st.sampled_from([0, 1, 2, 3]))


def refs(draw: st.DrawFn, store: ContextStore, cid: Any, other: Any) -> Any:
    visible = [m.id for m in store.visible(cid).messages]
    foreign = [m.id for m in store.visible(other).messages]
    return draw(st.one_of(
        st.sampled_from(visible or ["none"]), st.sampled_from(foreign), json_like,
        st.integers(-10, 10), st.lists(st.sampled_from((visible + foreign) or ["x"]), max_size=3),
    ))  # fmt: skip


@st.composite
def command(draw: st.DrawFn, store: ContextStore, cid: Any, other: Any) -> tuple[str, Any]:
    kind = draw(st.sampled_from(["insert", "delete", "replace", "compress", "batch_start",
                                 "batch_end", "usage", "prompt", "visible", "history", "fork",
                                 "create"]))  # fmt: skip
    v = draw(versions)
    calls = {
        "insert": lambda: store.insert(
            cid,
            draw(st.one_of(messages, st.lists(messages, max_size=3))),
            after=draw(st.one_of(st.none(), st.just(refs(draw, store, cid, other)))),
            expected_version=v,
        ),
        "delete": lambda: store.delete(cid, refs(draw, store, cid, other), expected_version=v),
        "replace": lambda: store.replace(
            cid,
            refs(draw, store, cid, other),
            draw(st.one_of(messages, st.text(max_size=5))),
            expected_version=v,
        ),
        "compress": lambda: store.compress(
            cid,
            refs(draw, store, cid, other),
            draw(st.one_of(messages, st.text(max_size=5))),
            stats=draw(st.one_of(st.none(), json_like)),
            expected_version=v,
        ),
        "batch_start": lambda: store.batch_start(cid, expected_version=v),
        "batch_end": lambda: store.batch_end(
            cid,
            draw(st.one_of(st.none(), st.integers(-3, 5), json_like)),
            keep=draw(st.booleans()),
            expected_version=v,
        ),
        "usage": lambda: store.record_usage(
            cid,
            model=draw(st.one_of(st.text(max_size=8), json_like)),
            prompt_tokens=draw(st.one_of(st.integers(-5, 10**12), json_like)),
            version=v,
        ),
        "prompt": lambda: store.build_prompt(
            cid,
            draw(st.one_of(st.integers(-5, 10**9), json_like)),
            draw(st.sampled_from([None, "full", "adaptive", "semantic", "compressed", "nope"])),
            at_version=v,
        ),
        "visible": lambda: store.visible(cid, at_version=v),
        "history": lambda: store.history(
            cid, types=draw(st.one_of(st.none(), json_like)), from_version=v
        ),
        "fork": lambda: store.fork(cid, at_version=v, name=draw(st.one_of(st.none(), json_like))),
        "create": lambda: store.create(
            name=draw(st.one_of(st.none(), json_like)),
            metadata=draw(json_like),  # type: ignore[arg-type]
        ),
    }
    return kind, calls[kind]


@pytest.mark.parametrize("examples", [int(os.environ.get("CTXSTORE_FUZZ_EXAMPLES", "40"))])
def test_hostile_commands_raise_typed_errors_and_write_nothing(store_url, examples):
    with ContextStore.from_url(store_url, Settings(snapshot_interval=4)) as store:

        @settings(max_examples=examples, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))  # fmt: skip
        @given(data=st.data())
        def run(data: st.DataObject) -> None:
            # Fresh contexts each example: what is drawn depends on this example alone.
            cid = store.create(name="target")
            other = store.create(name="another context")
            store.insert(other, [{"role": "user", "content": "someone else's"}])
            store.insert(
                cid, [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
            )
            for _ in range(data.draw(st.integers(1, 5))):
                kind, call = data.draw(command(store, cid, other))
                before = store.visible(cid).version
                other_before = store.visible(other).version
                try:
                    call()
                except CtxStoreError:
                    assert store.visible(cid).version == before, kind  # nothing written
                assert store.visible(other).version == other_before, kind
            *_, (_, replayed, _) = store.replay(cid)
            assert replayed.model_dump() == store.visible(cid).model_dump()

        run()
        assert store.verify().ok


@pytest.mark.parametrize("number", [float("nan"), float("inf"), -float("inf")])
def test_no_nan_or_infinity_reaches_a_stored_state(number):
    """The stored JSON's encoder would write NaN as null: every way in refuses it first."""
    store = ContextStore.from_url("memory://")
    cid = store.create()
    first = store.insert(cid, {"role": "user", "content": "x"}).ids[0]
    version = store.visible(cid).version
    attempts = [
        lambda: store.create(metadata={"n": number}),
        lambda: store.insert(cid, {"role": "user", "content": "y", "metadata": {"n": number}}),
        lambda: store.insert(cid, {"role": "user", "content": [{"type": "x", "v": [number]}]}),
        lambda: store.replace(
            cid, first, {"role": "user", "content": "z", "metadata": {"n": number}}
        ),
        lambda: store.compress(cid, [first], "s", stats={"ratio": number}),
        lambda: store.record_usage(
            cid,
            model="m",
            prompt_tokens=1,
            sent=[{"role": "user", "content": "q", "metadata": {"n": number}}],
        ),
    ]
    for attempt in attempts:
        with pytest.raises(CtxStoreError):
            attempt()
    assert store.visible(cid).version == version


def _nested(depth: int) -> dict[str, Any]:
    top: dict[str, Any] = {}
    here = top
    for _ in range(depth):
        here["a"] = {}
        here = here["a"]
    return top


@pytest.mark.parametrize("depth", [65, 1000, 20_000])
def test_json_nested_past_the_limit_is_refused_in_every_shape(store_url, depth):
    """Deeper than 64 levels, anywhere in a message of any shape: InvalidMessageError
    naming where, never the interpreter's RecursionError; nothing written."""
    deep = _nested(depth)
    shaped = [
        (None, {"role": "user", "content": "hi", "metadata": deep}),
        (None, {"role": "user", "content": [{"type": "text", "text": "x", "extra": deep}]}),
        ("openai-responses", {"type": "message", "role": "user",
                              "content": [{"type": "input_text", "text": "x", "x": deep}]}),
        ("anthropic", {"role": "user", "content": [{"type": "text", "text": "x", "x": deep}]}),
        ("gemini", {"role": "user", "parts": [{"text": "x", "x": deep}]}),
    ]  # fmt: skip
    with ContextStore.from_url(store_url, Settings(actor="fuzz")) as store:
        cid = store.create()
        for fmt, message in shaped:
            with pytest.raises(InvalidMessageError, match="nested deeper than 64"):
                store.insert(cid, message, format=fmt)
        assert store.visible(cid).version == 1


def test_a_key_that_is_not_valid_unicode_is_refused(store_url):
    with ContextStore.from_url(store_url, Settings(actor="fuzz")) as store:
        for ask in (store.context_for_key, store.lookup_key):
            with pytest.raises(InvalidOperationError, match="valid Unicode"):
                ask("k\ud800")
        assert store.contexts() == []
