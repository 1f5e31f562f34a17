"""One script of every contract operation, run on every surface: the in-process store
(memory, SQLite, PostgreSQL), the async store (SQLite, PostgreSQL), the HTTP client with a
tenant's token (SQLite, PostgreSQL), the sharded store (two PostgreSQL schemas) and the
HTTP client of a tenant's token to a service over the sharded store. Each
surface must see what the in-process store on SQLite sees — the same visible contexts,
versions, histories, prompts, calls, exports — and raise the same error class for the
same bad input."""

from __future__ import annotations

import asyncio
import inspect
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from ctxstore.adapters.http.client import CtxStoreClient
from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.contract import ContextOperations
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.adapters.store.reply_stream import StreamPolicy
from ctxstore.domain.errors import CtxStoreError

from ..conftest import make_url, served, surface_over
from .test_attachments import png

SETTINGS = Settings(snapshot_interval=4, actor="tester")
FACES = [
    "memory-store",
    "sqlite-store",
    pytest.param("postgres-store", marks=pytest.mark.postgres),
    "sqlite-async",
    pytest.param("postgres-async", marks=pytest.mark.postgres),
    "sqlite-http",
    pytest.param("postgres-http", marks=pytest.mark.postgres),
    pytest.param("postgres-sharded", marks=pytest.mark.postgres),
    pytest.param("postgres-shardedhttp", marks=pytest.mark.postgres),  # served over shards
]


class Awaited:
    """An async surface driven from plain test code: every call runs on one event loop in
    a thread of its own; a handle it returns is driven the same way, an async iterator
    collected into a list."""

    def __init__(self, target: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._target, self._loop = target, loop

    def _run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(60)

    def _drive(self, found: Any) -> Any:
        if inspect.isawaitable(found):
            found = self._run(found)
        if hasattr(found, "__aiter__"):

            async def collect() -> list[Any]:
                return [item async for item in found]

            return self._run(collect())
        if type(found).__name__ == "AsyncReplyStream":
            return Awaited(found, self._loop)
        return found

    def __getattr__(self, name: str) -> Any:
        member = getattr(self._target, name)
        if not callable(member):
            return member
        return lambda *args, **kwargs: self._drive(member(*args, **kwargs))


@contextmanager
def face_of(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Any]:
    backend, surface = kind.split("-")
    if surface.startswith("sharded"):
        from ctxstore.adapters.store.shards.store import ShardedStore

        urls = [make_url("postgres", tmp_path / str(n), request) for n in range(2)]
        with ShardedStore.from_urls(urls, SETTINGS) as sharded:
            if surface == "sharded":
                yield sharded
                return
            with served(sharded) as url, CtxStoreClient(url, token="token-acme") as client:
                yield client
        return
    with ContextStore.from_url(make_url(backend, tmp_path, request), SETTINGS) as store:
        if surface != "async":
            with surface_over(surface, store) as given:
                yield given
            return
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, daemon=True)
        thread.start()
        try:
            with surface_over("async", store) as given:
                yield Awaited(given, loop)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)
            loop.close()


# ---- the script -------------------------------------------------------------------------

USER = {"role": "user", "content": "What's the weather in Paris?"}
CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [{"id": "call_1", "type": "function",
                    "function": {"name": "weather", "arguments": '{"city": "Paris"}'}}],
}  # fmt: skip
RESULT = {"role": "tool", "tool_call_id": "call_1", "content": '{"high_c": 14}'}
COMPLETION = {
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o",
    "choices": [{"index": 0, "finish_reason": "stop",
                 "message": {"role": "assistant", "content": "It is 14 degrees."}}],
    "usage": {"prompt_tokens": 40, "completion_tokens": 6, "total_tokens": 46},
}  # fmt: skip


def seen(found: Any) -> Any:
    """What a result shows, without what differs by nature between surfaces (generated
    ids, times, who acted, where residue lies)."""
    if isinstance(found, list):
        return [seen(f) for f in found]
    name = type(found).__name__
    if name == "Written":
        return ("written", found.version, found.batch, len(found.ids), found.tokens)
    if name == "VisibleContext":
        return ("visible", found.version, found.batch, found.tokens,
                [(m.role, m.content) for m in found.messages])  # fmt: skip
    if name == "HistoryEntry":
        return (found.version, found.type, found.batch, found.reverted)
    if name == "Prompt":
        return ("prompt", found.version, found.tokens, [m.role for m in found.messages])
    if name == "ModelCall":
        return ("call", found.number, found.model, found.version, found.prompt_tokens)
    if name == "TailEvent":
        return ("event", found.version, found.type)
    if name == "ReplayStep":
        return ("step", found.event.version, len(found.visible.messages))
    if name == "Compaction":
        return ("compaction", found.skipped, found.dry_run, len(found.replaced), found.version)
    if name == "Erasure":
        return ("erasure", found.reason, found.events > 0)
    if name == "ContextSummary":
        return ("listed", found.name)
    if name == "BlobRef":  # (random pixels: sizes differ)
        return ("blob", found.media_type, found.width, found.height)
    if name in ("UUID", "NoneType", "int", "str", "bool"):
        return name
    if hasattr(found, "model_dump"):
        dumped = found.model_dump(mode="json")
        for noise in ("context_id", "created_at", "at", "timestamp", "cursor", "entries"):
            dumped.pop(noise, None)
        return (name, dumped)
    return name


def script(face: Any) -> list[tuple[str, Any]]:
    """Every contract operation once or more, and bad inputs; what each showed."""
    shown: list[tuple[str, Any]] = []

    def step(label: str, call: Callable[[], Any], show: Callable[[Any], Any] = seen) -> Any:
        try:
            found = call()
        except CtxStoreError as exc:
            shown.append((label, ("refused", type(exc).__name__)))
            return None
        shown.append((label, show(found)))
        return found

    key = "session-1"
    assert face.lookup_key(key) is None
    cid = step("create", lambda: face.create(name="weather chat"))
    step("context_for_key", lambda: face.context_for_key(key) is not None, repr)
    step("lookup_key", lambda: face.lookup_key(key) == face.context_for_key(key), repr)
    step("insert", lambda: face.insert(cid, [USER, CALL, RESULT]))
    step("visible", lambda: face.visible(cid))
    step("batch_start", lambda: face.batch_start(cid))
    step("insert in batch", lambda: face.insert(cid, {"role": "system", "content": "French."}))
    step("batches", lambda: face.batches(cid), lambda b: len(b))
    step("batch_end", lambda: face.batch_end(cid, to=0))
    step("replace", lambda: face.replace(cid, 0, {"role": "user", "content": "Weather, Paris?"}))
    step(
        "record_response",
        lambda: face.record_response(cid, COMPLETION, request={"messages": [USER]}),
    )
    captured = {
        "request": {"model": "gpt-4o", "messages": [USER], "tools": []},
        "response": COMPLETION, "source": "agents", "api": "openai.chat", "call_id": "c-1",
    }  # fmt: skip
    step("record_call", lambda: face.record_call(cid, captured))
    step("record_call again (the same call_id)", lambda: face.record_call(cid, captured))
    step(
        "record_usage",
        lambda: face.record_usage(cid, model="gpt-4o", prompt_tokens=30, completion_tokens=2),
    )
    prompt = step("build_prompt", lambda: face.build_prompt(cid, 2000))
    step(
        "record_usage prompt=",
        lambda: face.record_usage(cid, model="gpt-4o", prompt_tokens=33, prompt=prompt),
    )
    # The agent loop: a prompt's version stays current after its call's usage is recorded.
    at = prompt.version if prompt is not None else 0
    thanks = {"role": "user", "content": "Thanks."}
    step("write at the prompt's version", lambda: face.insert(cid, thanks, expected_version=at))
    step("bad: content moved since", lambda: face.insert(cid, thanks, expected_version=at))
    step("calls", lambda: face.calls(cid))
    step("call", lambda: face.call(cid, 1))
    step("call_diff", lambda: face.call_diff(cid, 1), lambda d: type(d).__name__)
    stream = face.stream(cid, policy=StreamPolicy(interval=3600, max_chars=10_000))
    stream.add({"text": "Sunny, "})
    stream.add({"text": "14 degrees."})
    step("finish refused", lambda: stream.finish({"role": "nobody"}))
    step("finish retried", lambda: stream.finish())
    step("visible after stream", lambda: face.visible(cid))
    begun = step("begin", lambda: face.begin(cid))
    step("append", lambda: face.append(cid, begun.ids[0], [{"text": "partial"}]))
    step("abandon", lambda: face.abandon(cid, begun.ids[0], reason="stopped", keep=False))
    begun = step("begin again", lambda: face.begin(cid))
    step("finish", lambda: face.finish(cid, begun.ids[0], deltas=[{"text": "done"}]))
    step("compress", lambda: face.compress(cid, [0, 1, 2], "asked about the weather"))
    summary = face.visible(cid).messages[0].id
    step("expand", lambda: face.expand(cid, summary))
    step("compact", lambda: face.compact(cid, trigger="manual", dry_run=True))
    step("recover_from_overflow", lambda: face.recover_from_overflow(cid, 2000))
    step("history", lambda: face.history(cid))
    step("diff", lambda: face.diff(cid, 1, 3), lambda d: type(d).__name__)
    step("token_series", lambda: face.token_series(cid), lambda t: len(t.points))
    step("replay", lambda: list(face.replay(cid, to_version=4)))
    step("usage_report", lambda: face.usage_report())
    step("verify", lambda: face.verify(cid), lambda v: v.ok)
    step("audit", lambda: face.audit(context_id=cid, limit=500), lambda p: len(p.entries))
    step("follow", lambda: list(face.follow(cid, after=0, idle=5)))
    lines = step("export_events", lambda: list(face.export_events(cid)), lambda x: len(x))
    copy = step("import_events", lambda: face.import_events(lines, new_id=True))
    step("imported", lambda: face.visible(copy))
    made = step("import_transcript", lambda: face.import_transcript([USER], name="t"))
    step("transcript", lambda: face.visible(made))
    fork = step("fork", lambda: face.fork(cid, at_version=2, name="fork"))
    step("forked", lambda: face.visible(fork))
    # (the sharded store lists server after server: the same contexts, in another order)
    step("contexts", lambda: sorted(c.name for c in face.contexts()), repr)
    listed = [c.context_id for c in face.contexts()]
    step(
        "contexts after",
        lambda: [c.context_id for c in face.contexts(after=listed[1], limit=2)] == listed[2:4],
        repr,
    )
    ref = step("put_blob", lambda: face.put_blob(png(4, 3), "image/png"))
    sha = ref.sha256 if ref is not None else "0" * 64
    step("blob", lambda: face.blob(sha), lambda b: (seen(b.ref), len(b.data) == b.ref.size))
    step("record_file_id", lambda: face.record_file_id(sha, "openai", "file-1"))
    hits = lambda p: sorted((h.role, h.snippet, h.visible, h.version) for h in p.hits)
    step("search", lambda: face.search("weather"), hits)
    step("search hidden", lambda: face.search("weather", include_hidden=True), hits)
    step("search a context", lambda: face.search("degrees", context_ids=[fork]), hits)
    step("search a page", lambda: face.search("weather", limit=1), lambda p: len(p.hits))
    step(
        "search the next page",
        lambda: face.search("weather", limit=1, cursor=face.search("weather", limit=1).cursor),
        lambda p: len(p.hits),
    )
    step("erase", lambda: face.erase(fork, reason="asked"))
    step("erased", lambda: face.visible(fork))
    step("erasures", lambda: face.erasures())
    # ---- the same error class for the same bad input
    unknown = uuid.uuid4()
    step("bad: diff from 0", lambda: face.diff(cid, 0, 2))
    step("bad: unknown context", lambda: face.visible(unknown))
    step("bad: unknown message", lambda: face.delete(cid, ["no-such-id"]))
    step("bad: tool result alone", lambda: face.insert(cid, RESULT))
    step("bad: no such batch", lambda: face.batch_end(cid, to=7))
    step("bad: stale version", lambda: face.insert(cid, USER, expected_version=1))
    step("bad: empty model", lambda: face.record_usage(cid, model="", prompt_tokens=1))
    step("bad: limit 0", lambda: face.contexts(limit=0))
    step("bad: nothing to summarize", lambda: face.compact(made))
    step("bad: trigger", lambda: face.compact(cid, trigger=""))
    step("bad: call 99", lambda: face.call(cid, 99))
    step("bad: unknown blob", lambda: face.blob("0" * 64))
    step("bad: empty query", lambda: face.search("  "))
    step("bad: search limit", lambda: face.search("weather", limit=0))
    return shown


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, Any]]:
    """What the in-process store shows on SQLite (a durable store: the memory face is
    compared with it like every other)."""
    path = tmp_path_factory.mktemp("reference") / "events.db"
    with ContextStore.from_url(f"sqlite:///{path}", SETTINGS) as store:
        return script(store)


def test_the_script_covers_every_operation():
    names = {n for n in vars(ContextOperations) if not n.startswith("_")} - {"close"}
    source = inspect.getsource(script)
    assert not [n for n in names if f"face.{n}(" not in source]


def test_the_agent_loop_writes_at_its_prompts_version(reference):
    """Build a prompt, record its call's usage, write with the prompt's version: stored;
    once the content moved on, the same version is refused (every face shows the same)."""
    shown = dict(reference)
    assert shown["write at the prompt's version"][0] == "written"
    assert shown["bad: content moved since"] == ("refused", "VersionConflictError")


@pytest.mark.parametrize("kind", FACES)
def test_every_surface_sees_what_the_store_sees(kind, tmp_path, request, reference):
    with face_of(kind, tmp_path, request) as face:
        shown = script(face)
    assert [label for label, _ in shown] == [label for label, _ in reference]
    differing = [
        (label, got, want)
        for (label, got), (_, want) in zip(shown, reference, strict=True)
        if got != want
    ]
    assert not differing, differing
