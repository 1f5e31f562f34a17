"""Capture under faults, driving the real SDKs (LangChain's ChatOpenAI, the OpenAI client
under OpenTelemetry's GenAI instrumentation) against the local fake provider. With the
store stopped, frozen, full, or losing the reply to a recording, the application's calls
get the provider's answers as without capture and nothing is raised into them; once the
store is back, every call is recorded exactly once (compared with what the provider
received); what could not be recorded is counted and logged. Latency under these faults
is measured by bench/bench_capture.py --only faults, not asserted here."""

from __future__ import annotations

import logging
import os
import socket
import sqlite3
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_openai")

from langchain_openai import ChatOpenAI

import ctxstore
import ctxstore.capture
from ctxstore.adapters.capture import recorder
from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.domain.errors import OutcomeUnknownError

from ..fake_provider import Reply

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import pg_cluster

CALLS = 4
APP_BOUND = 120  # seconds the application's calls may take at most (a hang, not a speed)


def _model(provider: Any) -> ChatOpenAI:
    return ChatOpenAI(model="gpt-4o", base_url=provider.url + "/v1", api_key="x", max_retries=0)


def _answers(provider: Any, store: Any, first: int, count: int = CALLS) -> list[str]:
    """`count` model calls captured into `store`, run on a thread of their own as the
    application's: their answers (it must finish within APP_BOUND s: a hang fails)."""
    provider.script(*(Reply(text=f"answer {n}") for n in range(first, first + count)))
    model = _model(provider)
    config: Any = {"callbacks": [ctxstore.capture.langchain(store)]}
    found: list[Any] = []

    def app() -> None:
        try:
            found.extend(
                model.invoke(f"question {n}", config=config).content
                for n in range(first, first + count)
            )
        except BaseException as exc:  # noqa: BLE001 - the test says what reached the app
            found.append(exc)

    thread = threading.Thread(target=app, name="the-application")
    thread.start()
    thread.join(APP_BOUND)
    assert not thread.is_alive(), "the application's calls waited on the store"
    return found


def _recorded_once(store: ContextStore, provider: Any, face: Any = None) -> None:
    """Every call the provider received is recorded once, with the body it received
    (`face`: the surface capture was given, when not the store itself)."""
    face = store if face is None else face
    assert ctxstore.capture.flush(face, 60), ctxstore.capture.stats(face)
    recorded = [
        store.call(c.context_id, n + 1).request
        for c in store.contexts()
        for n in range(len(store.calls(c.context_id)))
    ]
    received = provider.bodies("/chat/completions")
    key = sorted  # (contexts are listed in creation order, calls by context)
    assert key(map(repr, recorded)) == key(map(repr, received))
    stats = ctxstore.capture.stats(face)
    assert stats.recorded == stats.submitted == len(received) and stats.failed == 0, stats


@pytest.fixture
def cluster() -> Iterator[Any]:
    if not pg_cluster.available():
        reason = "PostgreSQL 15's initdb and pg_ctl are not installed"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the capture fault tests: {reason}")
        pytest.skip(reason)
    with pg_cluster.private_cluster() as c:
        yield c


@pytest.mark.postgres
@pytest.mark.slow
@pytest.mark.parametrize("fault", ["stopped", "frozen"])
def test_calls_made_while_postgresql_is_away_are_answered_and_recorded_once_it_is_back(
    cluster: Any, fake_provider: Any, fault: str
) -> None:
    with ContextStore.from_url(cluster.url, Settings(actor="app")) as store:
        assert _answers(fake_provider, store, 0, 1) == ["answer 0"]
        assert ctxstore.capture.flush(store, 30)
        if fault == "stopped":
            cluster.stop()
        else:
            cluster.freeze()
        try:
            answers = _answers(fake_provider, store, 1)
            assert answers == [f"answer {n}" for n in range(1, CALLS + 1)]
            assert not ctxstore.capture.flush(store, 0.5)  # still waiting for the store
            if fault == "stopped":  # back only once the recorder has met the outage
                _met_an_outage(store)
        finally:
            if fault == "stopped":
                cluster.start()
            else:
                cluster.thaw()
        _recorded_once(store, fake_provider)


def _met_an_outage(store: Any) -> None:
    for _ in range(600):
        if ctxstore.capture.stats(store).last_error is not None:
            return
        time.sleep(0.1)
    raise AssertionError("the recorder never met the outage")


def _full_disk(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Every SQLite commit fails as on a full disk while the event is set."""
    from eventsourcing.sqlite import SQLiteConnection

    full, commit = threading.Event(), SQLiteConnection.commit

    def committed(self: Any) -> None:
        if full.is_set():
            raise sqlite3.OperationalError("database or disk is full")
        commit(self)

    monkeypatch.setattr(SQLiteConnection, "commit", committed)
    return full


def test_calls_made_while_the_disk_is_full_are_recorded_once_it_has_room(
    tmp_path: Path, fake_provider: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ContextStore.from_url(f"sqlite:///{tmp_path / 'c.db'}") as store:
        full = _full_disk(monkeypatch)
        full.set()
        try:
            answers = _answers(fake_provider, store, 0)
            assert answers == [f"answer {n}" for n in range(CALLS)]
            assert not ctxstore.capture.flush(store, 0.5)
            assert "disk is full" in (ctxstore.capture.stats(store).last_error or "")
        finally:
            full.clear()
        _recorded_once(store, fake_provider)


class _LosingReplies:
    """The store, but the reply to each `lose` next recordings is lost after they are
    stored (as the HTTP client says OutcomeUnknownError when the service's answer never
    comes)."""

    def __init__(self, store: ContextStore, lose: int) -> None:
        self.store, self.lose = store, lose

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def record_call(self, context_id: Any, call: Any, **kwargs: Any) -> Any:
        written = self.store.record_call(context_id, call, **kwargs)
        if self.lose:
            self.lose -= 1
            raise OutcomeUnknownError("the reply was lost", command_id="")
        return written


def test_a_recording_whose_reply_was_lost_is_recorded_once(
    durable_url: str, fake_provider: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(recorder, "BACKOFF", (0.01,))
    with ContextStore.from_url(durable_url) as store:
        losing = _LosingReplies(store, lose=CALLS)
        assert _answers(fake_provider, losing, 0) == [f"answer {n}" for n in range(CALLS)]
        assert ctxstore.capture.flush(losing, 30)
        assert losing.lose == 0  # each call's first recording lost its reply
        stats = ctxstore.capture.stats(losing)
        assert stats.recorded == CALLS and stats.failed == 0, stats
        _recorded_once(store, fake_provider, losing)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_store_that_never_answers_is_counted_and_logged_never_raised(
    fake_provider: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """OpenTelemetry's OpenAI instrumentation with ctxstore's hook, CTXSTORE_URL naming a
    PostgreSQL port nothing listens on: the calls are answered, each one given up is
    counted and logged."""
    pytest.importorskip("opentelemetry.instrumentation.genai.openai")
    import openai
    from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.util.genai.completion_hook import load_completion_hook

    from ctxstore.adapters.capture import otel

    monkeypatch.setattr(recorder, "BACKOFF", (0.01,))
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK", "ctxstore")
    monkeypatch.setenv("CTXSTORE_URL", f"postgresql://postgres@127.0.0.1:{_closed_port()}/x")
    monkeypatch.setattr(otel, "_env", None)
    hook: Any = load_completion_hook()
    OpenAIInstrumentor().instrument(tracer_provider=TracerProvider(), completion_hook=hook)
    try:
        client = openai.OpenAI(base_url=fake_provider.url + "/v1", api_key="k", max_retries=0)
        fake_provider.script(*(Reply(text=f"answer {n}") for n in range(CALLS)))
        with caplog.at_level(logging.WARNING, logger="ctxstore.capture"):
            answers = [
                client.chat.completions.create(
                    model="gpt-4o", messages=[{"role": "user", "content": f"question {n}"}]
                )
                .choices[0]
                .message.content
                for n in range(CALLS)
            ]
            assert hook._wrapped.flush(60)
    finally:
        OpenAIInstrumentor().uninstrument()
    assert answers == [f"answer {n}" for n in range(CALLS)]
    stats = hook._wrapped.recorder.stats
    assert stats.submitted == CALLS and stats.recorded == 0 and stats.failed == CALLS, stats
    assert "cannot open the store" in (stats.last_error or "")
    assert caplog.text.count("a call was not recorded") == CALLS


def test_what_a_close_gave_up_is_still_counted_after_it(
    tmp_path: Path, fake_provider: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store closed while it cannot take the calls: they are given up within the
    close's bound, counted, and `ctxstore.capture.stats` still says so afterwards."""
    store = ContextStore.from_url(f"sqlite:///{tmp_path / 'c.db'}")
    full = _full_disk(monkeypatch)
    full.set()
    try:
        assert len(_answers(fake_provider, store, 0)) == CALLS
        closing = recorder.recorder_for(store)
        recorder.close_recorder(store, 0.5)  # (as store.close does first)
        assert closing.flush(30)  # the call in the writer's hand ends at its next try
    finally:
        full.clear()
        store.close()
    stats = ctxstore.capture.stats(store)
    assert stats is closing.stats
    assert stats.submitted == CALLS and stats.recorded == 0 and stats.failed == CALLS, stats
