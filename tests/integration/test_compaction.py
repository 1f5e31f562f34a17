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
from ctxstore.domain.compaction import CompactionConfig, NothingToSummarizeError
from ctxstore.domain.errors import PromptDoesNotFitError


def agent_turns(store, cid, turns, words=20):
    for t in range(turns):
        store.insert(cid, [
            {"role": "user", "content": f"Step {t}: please check the build. " + "detail " * words},
            {"role": "assistant", "tool_calls": [{"id": f"call_{t}", "type": "function", "function": {"name": "run_ci", "arguments": '{"job": "build"}'}}]},
            {"role": "tool", "tool_call_id": f"call_{t}", "content": f"build {t} passed. " + "log line " * words},
            {"role": "assistant", "content": f"Build {t} is green. " + "more " * words},
        ])  # fmt: skip


def test_compaction_writes_one_batch_and_one_compress_and_is_undone_by_one_batch_end(store):
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
    assert [h.type for h in history[events:]] == ["batch_start", "compress"]
    assert history[-1].version == history[-2].version + 1
    stats = history[-1].details["stats"]
    assert stats["algorithm"] == "bisect_v1" and stats["trigger"] == "manual"
    assert {"chunk_count", "max_depth", "truncated", "summarizer", "planner"} <= set(stats)
    assert stats["summarizer"]["name"] == "extractive"
    assert history[-1].message_ids == done.replaced
    after = store.visible(cid)
    assert after.tokens == done.tokens_after < done.tokens_before == before.tokens
    assert after.messages[0].role == "system" and after.summaries[done.summary_id] == done.replaced
    assert after.messages[-1] == before.messages[-1]
    store.batch_end(cid)
    assert store.visible(cid).messages == before.messages


def test_nothing_to_summarize_and_summary_boundary(store):
    cid = store.create()
    store.insert(cid, {"role": "user", "content": "hi"})
    with pytest.raises(NothingToSummarizeError):
        store.compact(cid)
    agent_turns(store, cid, 2)  # 4 rounds: keep 2, summarize 2
    store.compact(cid, in_batch=False)
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
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
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
