"""Search across contexts: recall on a multilingual corpus against a plain reference, the
visibility rules, filters and tenants, paging, erasure and history bounds leaving nothing,
reindex, keys, and every surface — on memory, SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import base64
import re
import subprocess
import unicodedata
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import SecretStr

from ctxstore.adapters.settings import SearchSettings, Settings
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.domain.errors import ContextNotFoundError, InvalidOperationError

from ..conftest import SURFACES, examples, make_url, surface_over

# Each conversation: (name, messages). Texts in English, French, German, Chinese, Japanese
# and Korean, and a tool call with its result.
CORPUS: list[tuple[str, list[dict[str, Any]]]] = [
    ("orders", [
        {"role": "user", "content": "Where is my order number 4411? I paid at the café."},
        {"role": "assistant", "content": "Your order 4411 ships on Monday."},
    ]),
    ("francais", [
        {"role": "user", "content": "Je voudrais un CAFÉ crème et un croissant, s'il vous plaît."},
        {"role": "assistant", "content": "Très bien: café crème, croissant."},
    ]),
    ("deutsch", [
        {"role": "user", "content": "Die Straße ist gesperrt; nehmen Sie die Umleitung über Köln."},
    ]),
    ("chinese", [
        {"role": "user", "content": "请把今天的会议记录发给我，谢谢"},
        {"role": "assistant", "content": "好的，会议记录已经发送到您的邮箱。"},
    ]),
    ("japanese", [
        {"role": "user", "content": "東京の天気はどうですか"},
        {"role": "assistant", "content": "東京は晴れです。気温は十四度です。"},
    ]),
    ("korean", [{"role": "user", "content": "내일 회의 일정을 알려주세요"}]),
    ("tools", [
        {"role": "user", "content": "What is the weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [{
            "id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Lyon"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"forecast": "drizzle"}'},
    ]),
]  # fmt: skip
QUERIES = [
    "order", "ORDER 4411", "cafe", "café crème", '"order number"', '"number order"', "strasse",
    "köln", "会议", "会议记录", "记录 会议", "天気", "東京", "회의", "일정을", "get_weather",
    "lyon", "drizzle", "weather paris", "croissant monday", "nothing-like-this", "4411",
]  # fmt: skip
CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")


def plain_fold(text: str) -> str:
    """The reference's folding, written apart from the store's: NFKD, marks dropped (outside
    CJK), case folded."""
    out: list[str] = []
    for ch in unicodedata.normalize("NFKD", text.casefold()):
        if unicodedata.category(ch) == "Mn" and not CJK.search(out[-1] if out else ""):
            continue
        out.append(ch)
    return "".join(out).replace("ß", "ss")


def reference_match(query: str, text: str) -> bool:
    """Every piece of the query (a word, or a quoted phrase) appears in the text: CJK as a
    substring, anything else as the same run of words."""
    words_of = lambda s: re.findall(r"[^\W_]+", plain_fold(s))
    text_words = words_of(text)
    folded = plain_fold(text)
    for quoted, bare in re.findall(r'"([^"]*)"|(\S+)', query):
        piece = words_of(quoted or bare)
        if not piece:
            continue
        if any(CJK.search(w) for w in piece):
            if not all(w in folded for w in piece) or " ".join(piece) not in " ".join(
                re.findall(r"[^\W_]+", folded)
            ):  # fmt: skip
                return False
            continue
        n = len(piece)
        if not any(text_words[i : i + n] == piece for i in range(len(text_words))):
            return False
    return True


def text_of(m: dict[str, Any]) -> str:
    parts = [m.get("content") or ""]
    for call in m.get("tool_calls") or []:
        parts += [call["function"]["name"], call["function"]["arguments"]]
    return "\n".join(parts)


def write_corpus(store: Any) -> dict[str, Any]:
    ids = {}
    for name, messages in CORPUS:
        cid = store.create(name=name)
        written = store.insert(cid, messages)
        ids[name] = (cid, written.ids)
    return ids


def every_hit(store: Any, query: str, **kwargs: Any) -> list[Any]:
    hits, cursor = [], None
    while True:
        page = store.search(query, limit=kwargs.pop("limit", 3), cursor=cursor, **kwargs)
        hits += page.hits
        if page.cursor is None:
            return hits
        cursor = page.cursor
        kwargs["limit"] = 3


@pytest.mark.parametrize("query", QUERIES)
def test_recall_matches_the_reference_in_every_language(store, query):
    ids = write_corpus(store)
    expected = {
        mid
        for name, messages in CORPUS
        for m, mid in zip(messages, ids[name][1], strict=True)
        if reference_match(query, text_of(m))
    }
    found = every_hit(store, query)
    assert sorted(h.message_id for h in found) == sorted(expected)  # each once
    assert all(h.visible for h in found)
    scores = [h.score for h in store.search(query, limit=100).hits]
    assert scores == sorted(scores, reverse=True)


def test_a_hit_says_where_it_is_and_marks_the_match(store):
    ids = write_corpus(store)
    (hit,) = store.search('"order number"').hits
    cid, mids = ids["orders"]
    assert (hit.context_id, hit.message_id, hit.role, hit.context_name) == (
        cid, mids[0], "user", "orders"
    )  # fmt: skip
    assert "«order number»" in hit.snippet and hit.version == 2
    assert abs(hit.at - datetime.now(UTC)) < timedelta(minutes=5)
    (cjk,) = store.search("会议记录", roles=["user"]).hits
    assert "«会议记录»" in cjk.snippet


def test_only_what_each_context_shows_unless_hidden_is_asked(store):
    cid = store.create()
    first = store.insert(cid, [{"role": "user", "content": "alpha deleted"},
                               {"role": "user", "content": "bravo replaced"},
                               {"role": "user", "content": "charlie kept"}]).ids  # fmt: skip
    store.delete(cid, [first[0]])
    store.replace(cid, first[1], {"role": "user", "content": "bravo anew"})
    store.batch_start(cid)
    store.insert(cid, {"role": "user", "content": "delta rolled back"})
    store.batch_end(cid, to=0)
    summary = store.compress(cid, [first[2]], "echo summary of charlie").ids[0]

    def shown(query: str, **kw: Any) -> list[tuple[str, bool]]:
        return sorted((h.snippet.replace("«", "").replace("»", ""), h.visible)
                      for h in store.search(query, **kw).hits)  # fmt: skip

    assert shown("alpha") == [] and shown("delta") == [] and shown("charlie kept") == []
    assert shown("bravo") == [("bravo anew", True)]
    assert shown("echo") == [("echo summary of charlie", True)]
    assert shown("alpha", include_hidden=True) == [("alpha deleted", False)]
    assert shown("bravo", include_hidden=True) == [("bravo anew", True), ("bravo replaced", False)]
    assert shown("delta", include_hidden=True) == [("delta rolled back", False)]
    store.expand(cid, summary)  # the covered message is shown again, the summary hidden
    assert shown("charlie kept") == [("charlie kept", True)]
    assert shown("echo") == [] and shown("echo", include_hidden=True)[0][1] is False


def test_a_streamed_reply_is_found_as_it_finished_and_forks_hold_their_copies(store):
    cid = store.create()
    store.insert(cid, {"role": "user", "content": "tell me a story"})
    stream = store.stream(cid)
    stream.add({"text": "Once upon a time, "})
    stream.add({"text": "a dragon slept."})
    stream.finish()
    (hit,) = store.search("dragon").hits
    assert hit.role == "assistant" and hit.visible
    fork = store.fork(cid, name="the fork")
    assert sorted(h.context_id for h in store.search("dragon").hits) == sorted([cid, fork])


def test_filters_by_context_role_and_time(store):
    ids = write_corpus(store)
    orders, cafe = ids["orders"][0], ids["francais"][0]
    assert {h.context_id for h in store.search("café", context_ids=[orders]).hits} == {orders}
    assert {h.role for h in store.search("café", roles=["assistant"]).hits} == {"assistant"}
    assert len(store.search("café", context_ids=[orders, cafe]).hits) == 3
    later = datetime.now(UTC) + timedelta(hours=1)
    assert store.search("café", since=later).hits == []
    assert len(store.search("café", until=later).hits) == 3
    assert store.search("café", context_ids=[uuid.uuid4()]).hits == []


def test_tenants_never_see_each_other(durable_url):
    with ContextStore.from_url(durable_url) as store:
        for tenant in ("acme", "globex"):
            cid = store.create(name=tenant, tenant=tenant)
            store.insert(cid, {"role": "user", "content": f"quarterly numbers of {tenant}"})
        assert {h.context_name for h in store.search("quarterly", tenant="acme").hits} == {"acme"}
        assert store.search("globex", tenant="acme").hits == []
        assert len(store.search("quarterly").hits) == 2  # no tenant: the whole store


def test_pages_give_every_hit_once_in_score_order(store):
    cid = store.create()
    store.insert(cid, [{"role": "user", "content": f"needle {'hay ' * (i % 7)}{i}"}
                       for i in range(23)])  # fmt: skip
    for limit in (1, 4, 10):
        hits = every_hit(store, "needle", limit=limit)
        assert len(hits) == 23 and len({h.message_id for h in hits}) == 23
        scores = [h.score for h in hits]
        assert scores == sorted(scores, reverse=True)


def test_bad_input_is_refused_by_name(store):
    store.insert(store.create(), {"role": "user", "content": "hello"})
    for bad, said in (
        (lambda: store.search(""), "needs a query"),
        (lambda: store.search("...!"), "no letters or digits"),
        (lambda: store.search("x" * 1001), "at most 1000"),
        (lambda: store.search("hello", limit=0), "limit"),
        (lambda: store.search("hello", limit=101), "limit"),
        (lambda: store.search("hello", cursor="garbage!"), "not a search cursor"),
        (lambda: store.search("hello", since=datetime(2026, 1, 1)), "timezone"),
        (lambda: store.search("hello", include_hidden="yes"), "include_hidden"),
    ):
        with pytest.raises(InvalidOperationError, match=said):
            bad()
    with pytest.raises(ContextNotFoundError):
        store.search("hello", context_ids=["not-an-id"])
    page = store.search("hello", limit=1)
    other = store.create()
    store.insert(other, {"role": "user", "content": "hello again"})
    cursor = store.search("hello", limit=1).cursor
    assert cursor is not None and page is not None
    with pytest.raises(InvalidOperationError, match="another search"):
        store.search("hello world", limit=1, cursor=cursor)


def test_reindex_gives_the_same_results(durable_url):
    with ContextStore.from_url(durable_url) as store:
        write_corpus(store)
        cid = store.create()
        w = store.insert(cid, [{"role": "user", "content": "order gone"}])
        store.delete(cid, w.ids)
        before = {q: _shown(store, q) for q in QUERIES}
        _, rows = store.admin.reindex()
        assert rows >= sum(len(m) for _, m in CORPUS)
        assert {q: _shown(store, q) for q in QUERIES} == before


def _shown(store: Any, query: str) -> list[tuple[str, str, bool]]:
    return sorted((h.message_id, h.snippet, h.visible)
                  for h in every_hit(store, query, include_hidden=True))  # fmt: skip


def test_erasure_leaves_no_hit_and_no_copy_in_the_sqlite_file(tmp_path):
    url = f"sqlite:///{tmp_path / 'events.db'}"
    marker = "xylophonequartz"  # once in the erased context, never elsewhere
    with ContextStore.from_url(url) as store:
        kept = store.create(name="kept")
        store.insert(kept, {"role": "user", "content": "an ordinary kept message"})
        gone = store.create(name="gone")
        store.insert(gone, [{"role": "user", "content": f"the {marker} secret"},
                            {"role": "user", "content": "会议记录 机密"}])  # fmt: skip
        assert len(store.search(marker).hits) == 1
        store.erase(gone, reason="asked")
        assert store.search(marker, include_hidden=True).hits == []
        assert store.search("机密", include_hidden=True).hits == []
        assert len(store.search("ordinary").hits) == 1
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("events.db"))
    assert marker.encode() not in raw
    assert "机密".encode() not in raw


@pytest.mark.postgres
def test_erasure_leaves_no_copy_in_a_postgresql_dump(tmp_path, request):
    url = make_url("postgres", tmp_path, request)
    marker = "xylophonequartz"
    with ContextStore.from_url(url) as store:
        gone = store.create(name="gone")
        store.insert(gone, {"role": "user", "content": f"the {marker} secret"})
        assert len(store.search(marker).hits) == 1
        store.erase(gone, reason="asked")
        assert store.search(marker, include_hidden=True).hits == []
    base, _, query = url.partition("?")
    schema = query.split("schema=")[1] if "schema=" in query else "public"
    dump = subprocess.run(
        ["/usr/lib/postgresql/15/bin/pg_dump", "--data-only", "-n", schema, base],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert marker not in dump


def test_a_history_bound_removes_the_hidden_text_and_keeps_what_is_shown(durable_url):
    with ContextStore.from_url(durable_url) as store:
        cid = store.create()
        ids = store.insert(cid, [{"role": "user", "content": "mango kept"},
                                 {"role": "user", "content": "papaya dropped"}]).ids  # fmt: skip
        store.delete(cid, [ids[1]])
        for i in range(24):  # (a bound trims once 16 events are past it)
            store.insert(cid, {"role": "user", "content": f"filler {i}"})
        assert len(store.search("papaya", include_hidden=True).hits) == 1
        store.admin.set_retention(None, keep_latest=3, context_id=cid, yes=True)
        assert len(store.admin.sweep().trimmed) == 1
        assert store.search("papaya", include_hidden=True).hits == []
        assert [h.visible for h in store.search("mango").hits] == [True]
        assert len(store.search("filler", limit=100).hits) == 24


def test_an_expired_context_is_not_found_before_the_sweep(durable_url):
    with ContextStore.from_url(durable_url) as store:
        cid = store.create()
        store.insert(cid, {"role": "user", "content": "ephemeral words"})
        assert len(store.search("ephemeral").hits) == 1
        store.admin.set_retention(3600, context_id=cid, yes=True)
        store._core.retention.clock = lambda: datetime.now(UTC).timestamp() + 7200
        assert store.search("ephemeral").hits == []


def test_encrypted_contexts_are_indexed_only_when_asked(tmp_path):
    key = SecretStr(base64.b64encode(b"k" * 32).decode())
    for index_encrypted, found in ((False, 0), (True, 1)):
        settings = Settings(
            encryption_key=key, search=SearchSettings(index_encrypted=index_encrypted)
        )  # fmt: skip
        with ContextStore.from_url(f"sqlite:///{tmp_path / f'{found}.db'}", settings) as store:
            cid = store.create()
            store.insert(cid, {"role": "user", "content": "classified words"})
            assert len(store.search("classified").hits) == found


def test_search_turned_off_keeps_no_index_and_says_so(tmp_path):
    settings = Settings(search=SearchSettings(enabled=False))
    with ContextStore.from_url(f"sqlite:///{tmp_path / 'e.db'}", settings) as store:
        store.insert(store.create(), {"role": "user", "content": "hello"})
        with pytest.raises(InvalidOperationError, match="turned off"):
            store.search("hello")


@pytest.mark.parametrize("surface", SURFACES)
def test_every_surface_finds_the_same(surface, durable_url):
    with ContextStore.from_url(durable_url) as store, surface_over(surface, store) as face:
        call = _caller(face, surface)
        cid = call("create", name="chat")
        call("insert", cid, [{"role": "user", "content": "Où est le café? 会议记录"},
                             {"role": "assistant", "content": "Le café est fermé."}])  # fmt: skip
        gone = call("insert", cid, {"role": "user", "content": "café oublié"}).ids
        call("delete", cid, gone)
        first = call("search", "cafe", limit=1)
        assert len(first.hits) == 1 and first.cursor is not None
        second = call("search", "cafe", limit=1, cursor=first.cursor)
        assert {h.message_id for h in first.hits + second.hits} == {
            m.id for m in call("visible", cid).messages
        }  # fmt: skip
        assert second.cursor is None
        hidden = call("search", "oublié", include_hidden=True)
        assert [h.visible for h in hidden.hits] == [False]
        assert [h.role for h in call("search", "会议", roles=["user"]).hits] == ["user"]
        if surface == "http":  # another tenant finds nothing of acme's
            from ctxstore.adapters.http.client import CtxStoreClient

            with CtxStoreClient(str(face.http.base_url), token="token-globex") as globex:
                assert globex.search("cafe", include_hidden=True).hits == []


def _caller(face: Any, surface: str) -> Any:
    if surface != "async":
        return lambda op, *a, **k: getattr(face, op)(*a, **k)
    return lambda op, *a, **k: asyncio.run(getattr(face, op)(*a, **k))


def test_the_sqlite_index_is_ranked_by_its_engine(tmp_path):
    with ContextStore.from_url(f"sqlite:///{tmp_path / 'r.db'}") as store:
        cid = store.create()
        store.insert(cid, [{"role": "user", "content": "rare"},
                           {"role": "user", "content": "rare " + "common " * 50}])  # fmt: skip
        hits = store.search("rare").hits
        assert hits[0].snippet == "«rare»" and hits[0].score > hits[1].score
    assert Path(tmp_path / "r.db").exists()


FAULT_AT = {"store": 3, "advance": 1, "head": 3}  # (a catch-up advances once per page)


@pytest.mark.parametrize("step", list(FAULT_AT))
def test_a_catch_up_that_fails_midway_is_never_wrong_and_catches_up(durable_url, step):
    """A fault at each step of a catch-up (a rows transaction, the position's, a head read)
    leaves the index behind, never wrong: the next search catches up, and every query
    answers as a rebuild from the events does."""
    with ContextStore.from_url(durable_url) as store:
        ids = write_corpus(store)
        cid = ids["orders"][0]
        store.delete(cid, [ids["orders"][1][0]])
        index = store._core.storage.search_index
        assert index is not None
        original = getattr(index, step)
        calls = [0]

        def failing(*args: Any, **kwargs: Any) -> Any:
            calls[0] += 1
            if calls[0] == FAULT_AT[step]:  # that call fails, as on a lost connection
                raise RuntimeError(f"fault injected at {step}")
            return original(*args, **kwargs)

        setattr(index, step, failing)
        with pytest.raises(Exception, match="fault injected"):
            store.search("order")
        setattr(index, step, original)
        after_fault = {q: _shown(store, q) for q in QUERIES}
        store.admin.reindex()
        assert {q: _shown(store, q) for q in QUERIES} == after_fault


@settings(
    max_examples=examples(60), deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],  # (one store for all)
)  # fmt: skip
@given(query=st.text(max_size=300))
def test_any_query_text_is_answered_or_refused_by_name(store, query):
    """Hostile query text — the engines' own syntax (NEAR, *, ^, :, quotes, parentheses),
    control characters, lone surrogates, every script — is searched as words, or refused
    with InvalidOperationError; never an engine's error, never a crash."""
    if not store.contexts(limit=1):
        cid = store.create()
        store.insert(cid, {"role": "user", "content": 'NEAR("a" b) col:x ^y * "z" 会议 & | !'})
    try:
        page = store.search(query)
    except InvalidOperationError:
        return
    assert all(isinstance(h.snippet, str) for h in page.hits)
