"""Compaction through the store: events written, undo, triggers, overflow recovery, summarizers."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxstore.adapters.llm.summarizers import OpenAISummarizer
from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.domain.compaction import CompactionConfig
from ctxstore.domain.errors import NothingToSummarizeError, PromptDoesNotFitError, UnknownBatchError

from ..conftest import examples


def agent_turns(store, cid, turns, words=20):
    for t in range(turns):
        store.insert(cid, [
            {"role": "user", "content": f"Step {t}: please check the build. " + "detail " * words},
            {"role": "assistant", "tool_calls": [{"id": f"call_{t}", "type": "function", "function": {"name": "run_ci", "arguments": '{"job": "build"}'}}]},
            {"role": "tool", "tool_call_id": f"call_{t}", "content": f"build {t} passed. " + "log line " * words},
            {"role": "assistant", "content": f"Build {t} is green. " + "more " * words},
        ])  # fmt: skip


def test_compaction_writes_one_compress_in_the_current_batch_and_leaves_the_stack_alone(store):
    cid = store.create()
    store.insert(cid, {"role": "system", "content": "You are a CI assistant."})
    agent_turns(store, cid, 6)
    before = store.visible(cid)
    events = len(store.history(cid))
    dry = store.compact(cid, dry_run=True)
    assert dry.dry_run and dry.replaced and len(store.history(cid)) == events
    done = store.compact(cid)
    assert done.plan["mode"] == "half-window" and done.replaced == dry.replaced
    history = store.history(cid)
    assert [h.type for h in history[events:]] == ["compress"]
    assert store.visible(cid).batch == 0
    stats = history[-1].details["stats"]
    assert stats["algorithm"] == "bisect_v1" and stats["trigger"] == "manual"
    assert {"chunk_count", "max_depth", "truncated", "summarizer", "planner"} <= set(stats)
    assert stats["summarizer"]["name"] == "extractive"
    assert history[-1].message_ids == done.replaced
    after = store.visible(cid)
    assert after.tokens == done.tokens_after < done.tokens_before == before.tokens
    assert after.messages[0].role == "system" and after.summaries[done.summary_id] == done.replaced
    assert after.messages[-1] == before.messages[-1]
    with pytest.raises(UnknownBatchError):  # no batch was opened: nothing to end
        store.batch_end(cid)
    store.expand(cid, done.summary_id)
    assert store.visible(cid).messages == before.messages


def test_an_agents_savepoint_survives_a_compaction_inside_it(store):
    """The agent opens a savepoint, auto-compaction runs inside it, the agent rolls back:
    its own speculative turns go, and so does the compaction made inside the batch; the
    batch the agent opened is the one that closes."""
    cid = store.create()
    agent_turns(store, cid, 6)
    before = store.visible(cid)
    opened = store.batch_start(cid).batch
    store.insert(cid, {"role": "user", "content": "speculative"})
    store.compact(cid)
    agent_turns(store, cid, 1)
    assert store.visible(cid).batch == opened
    assert store.batch_end(cid).batch == opened - 1
    assert store.visible(cid).messages == before.messages


def test_a_compaction_kept_when_the_agent_keeps_its_batch(store):
    cid = store.create()
    agent_turns(store, cid, 6)
    store.batch_start(cid)
    done = store.compact(cid)
    last = store.insert(cid, {"role": "user", "content": "and now the release"}).ids[0]
    store.batch_end(cid, keep=True)
    after = store.visible(cid)
    assert after.batch == 0 and done.summary_id in after.summaries
    assert after.messages[-1].id == last


def test_nothing_to_summarize_and_summary_boundary(store):
    cid = store.create()
    store.insert(cid, {"role": "user", "content": "hi"})
    with pytest.raises(NothingToSummarizeError):
        store.compact(cid)
    agent_turns(store, cid, 2)  # 4 rounds: keep 2, summarize 2
    store.compact(cid)
    skipped = store.compact(cid)  # too few rounds since that summary
    assert skipped.skipped and "latest summary" in skipped.skipped


class Broken:
    name, model, prompt_version = "broken", "none", "test"

    def summarize(self, messages, *, target_tokens):
        raise RuntimeError("provider said 401")


def test_a_failed_summarization_writes_nothing(store):
    cid = store.create()
    agent_turns(store, cid, 6)
    events = len(store.history(cid))
    with pytest.raises(RuntimeError, match="401"):
        store.compact(cid, summarizer=Broken())
    assert len(store.history(cid)) == events and store.visible(cid).batch == 0


def test_proactive_compaction_after_inserts_cross_a_threshold():
    cfg = Settings(compaction=CompactionConfig(auto=True, message_limit=20))
    with ContextStore.from_url("memory://", cfg) as store:
        cid = store.create()
        agent_turns(store, cid, 6)
        compressions = store.history(cid, types=["compress"])
        assert compressions and compressions[0].details["stats"]["trigger"] == "proactive"
        assert len(store.visible(cid).messages) < 24


@settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(turns=st.integers(1, 14), words=st.integers(1, 80), budget=st.integers(60, 4000))
def test_recover_from_overflow_returns_a_prompt_that_fits(turns, words, budget):
    with ContextStore.from_url("memory://") as store:
        cid = store.create()
        store.insert(cid, {"role": "system", "content": "Be brief."})
        agent_turns(store, cid, turns, words)
        try:
            prompt = store.recover_from_overflow(cid, budget)
        except PromptDoesNotFitError:
            head = store.visible(cid)
            newest_user = [m for m in head.messages if m.role == "user"][-1]
            must = head.token_counts[head.messages[0].id] + head.token_counts[newest_user.id] + 3
            assert must > int(budget * 0.9)
            return
        assert prompt.tokens <= prompt.limit == int(budget * 0.9)
        assert prompt.messages[0].content == "Be brief."


class FakeProvider(BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint with a small window and an API key."""

    window_chars = 1500

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.headers.get("Authorization") != "Bearer right-key":
            return self._reply(
                401,
                {
                    "error": {
                        "message": "bad key",
                        "type": "invalid_request_error",
                        "code": "invalid_api_key",
                    }
                },
            )
        size = sum(len(m["content"]) for m in body["messages"])
        if size > self.window_chars:
            return self._reply(
                400,
                {
                    "error": {
                        "message": "This model's maximum context length is 1500 tokens.",
                        "type": "invalid_request_error",
                        "code": "context_length_exceeded",
                    }
                },
            )
        return self._reply(200, {
            "id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": f"summary of {size} chars"}}],
        })  # fmt: skip

    def _reply(self, status, payload):
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def provider():
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeProvider)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


def test_openai_compatible_summarizer_bisects_on_the_providers_overflow(provider):
    with ContextStore.from_url("memory://") as store:
        cid = store.create()
        agent_turns(store, cid, 8, words=15)
        done = store.compact(
            cid, summarizer=OpenAISummarizer("small-model", base_url=provider, api_key="right-key")
        )
        assert done.stats["chunk_count"] > 1 and done.stats["summarizer"]["model"] == "small-model"
        assert store.visible(cid).messages[0].text().startswith("summary of")
        events = len(store.history(cid))
        with pytest.raises(openai.AuthenticationError):
            store.compact(
                cid, summarizer=OpenAISummarizer("small-model", base_url=provider, api_key="wrong")
            )
        assert len(store.history(cid)) == events


def long_task(store, cid, rounds=8):
    """One user request, then many rounds of tool calls in the same (active) turn."""
    store.insert(cid, {"role": "system", "content": "You deploy services."})
    request = store.insert(cid, {"role": "user", "content": "Deploy billing to eu-west."}).ids[0]
    for r in range(rounds):
        store.insert(cid, [
            {"role": "assistant", "tool_calls": [{"id": f"k{r}", "type": "function", "function": {"name": "kubectl", "arguments": json.dumps({"step": r})}}]},
            {"role": "tool", "tool_call_id": f"k{r}", "content": f"step {r} ok " + "log " * 30},
        ])  # fmt: skip
    return request


@pytest.mark.parametrize("strategy", ["full", "compressed", "adaptive", "semantic"])
def test_the_users_request_is_kept_after_a_compaction_not_the_summary(store, strategy):
    """A compaction inside the active turn writes its summary right after the request; the
    prompt keeps the request (the newest message the user wrote), whatever the budget."""
    cid = store.create()
    request = long_task(store, cid)
    done = store.compact(cid)
    head = store.visible(cid)
    summary = next(m for m in head.messages if m.id == done.summary_id)
    assert summary.role == "system" and summary.metadata["ctxstore"] == "summary"
    assert head.ids.index(done.summary_id) == head.ids.index(request) + 1
    must = head.token_counts[head.ids[0]] + head.token_counts[request] + 3
    prompt = store.build_prompt(cid, int((must + 40) / 0.9) + 1, strategy=strategy)
    assert request in [m.id for m in prompt.messages]


def test_recover_from_overflow_keeps_the_request(store):
    cid = store.create()
    request = long_task(store, cid, rounds=12)
    prompt = store.recover_from_overflow(cid, 300)
    assert request in [m.id for m in prompt.messages]
    assert store.history(cid, types=["compress"])


def test_a_summary_that_would_not_save_a_share_is_not_written(store):
    """Ten short turns: an extractive summary is about as long as what it would replace,
    so the compaction says why it skipped and writes nothing."""
    cid = store.create()
    for n in range(10):
        store.insert(cid, [{"role": "user", "content": f"q{n}?"},
                           {"role": "assistant", "content": f"a{n}."}])  # fmt: skip
    before = store.visible(cid)
    done = store.compact(cid)
    assert done.summary_id is None and done.version is None
    assert done.skipped and "would save" in done.skipped and "10%" in done.skipped
    assert store.visible(cid).version == before.version
    assert "compress" not in [h.type for h in store.history(cid)]
