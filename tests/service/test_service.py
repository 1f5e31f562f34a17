"""The HTTP service over real HTTP (uvicorn on loopback), on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from ctxstore import (
    ContextExistsError,
    ContextNotFoundError,
    InvalidMessageError,
    MalformedTranscriptError,
    UnknownMessageError,
    VersionConflictError,
)
from ctxstore.adapters.http.transport import ServiceError

USER = {"role": "user", "content": "What is the capital of France?"}
ASSISTANT = {"role": "assistant", "content": "Paris."}
CALL = {
    "role": "assistant",
    "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
}
RESULT = {"role": "tool", "tool_call_id": "c1", "content": "42"}


def raw(service, method, path, token="token-acme", **kw):
    headers = kw.pop("headers", {})
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return httpx.request(method, service.url + path, headers=headers, timeout=30, **kw)


def test_every_operation_round_trips_as_in_process(service):
    with service.client(actor="bot") as c:
        cid = c.create(name="chat", metadata={"k": 1})
        w = c.insert(cid, [USER, ASSISTANT])
        assert (w.version, w.messages) == (2, 2)
        first, second = w.ids
        c.batch_start(cid)
        c.insert(cid, [CALL, RESULT])
        c.replace(cid, second, "Paris, of course.")
        back = c.batch_end(cid)
        assert back.messages == 2  # rolled back to the batch's start
        c.compress(cid, [first, second], "asked about France")
        c.record_usage(cid, model="gpt-4o", prompt_tokens=20)
        seen = c.visible(cid)
        local = service.store.visible(cid)
        assert seen.model_dump() == local.model_dump()
        assert (
            c.visible(cid, at_version=2).model_dump()
            == service.store.visible(cid, at_version=2).model_dump()
        )
        assert [h.type for h in c.history(cid)] == [h.type for h in service.store.history(cid)]
        assert c.history(cid)[2].reverted  # the batch's insert, reverted by batch_end
        assert (
            c.diff(cid, 2, seen.version).model_dump()
            == service.store.diff(cid, 2, seen.version).model_dump()
        )
        assert (
            c.build_prompt(cid, 1000).model_dump()
            == service.store.build_prompt(cid, 1000).model_dump()
        )
        assert len(c.calls(cid)) == 1
        assert c.verify(cid).ok
        fork = c.fork(cid)
        assert [m.content for m in c.visible(fork).messages] == [m.content for m in seen.messages]
        assert {s.context_id for s in c.contexts()} >= {cid, fork}
        assert service.store.history(cid)[1].actor == "acme:bot"  # tenant, then claimed actor


def test_compact_and_audit_over_http(service):
    with service.client() as c:
        cid = c.create()
        for i in range(8):
            answer = {"role": "assistant", "content": "Paris. " + "It has been since 508. " * 8}
            c.insert(cid, [{"role": "user", "content": f"question {i}. more"}, answer])
        plan = c.compact(cid, dry_run=True)
        assert plan.dry_run and plan.replaced
        done = c.compact(cid)
        assert done.summary_id in [m.id for m in c.visible(cid).messages]
        page = c.audit(context_id=cid, limit=5)
        assert [e.version for e in page.entries] == [1, 2, 3, 4, 5] and page.more
        rest = c.audit(context_id=cid, after=page.cursor, limit=1000)
        assert [e.version for e in rest.entries] == list(range(6, c.visible(cid).version + 1))
        assert "compress" in {e.type for e in rest.entries}


def test_authentication_is_required_and_health_is_open(service):
    assert raw(service, "GET", "/health", token=None).json()["status"] == "ok"
    for token in (None, "wrong"):
        r = raw(service, "GET", "/v1/contexts", token=token)
        assert r.status_code == 401
        assert r.headers["content-type"] == "application/problem+json"
        assert r.headers["www-authenticate"].startswith("Bearer")
    r = raw(service, "GET", "/v1/contexts", token=None, headers={"Authorization": "Basic eDp5"})
    assert r.status_code == 401
    with pytest.raises(ServiceError) as err:
        service.client(token="nope").contexts()
    assert err.value.status == 401


def test_tenants_see_only_their_own_contexts(service):
    acme, globex = service.client(), service.client("token-globex")
    cid = acme.create(name="secret")
    w = acme.insert(cid, [USER])
    unknown = uuid.uuid4()
    # Every route answers another tenant's context exactly as one that does not exist.
    for target in (cid, unknown):
        for call in (
            lambda t: globex.visible(t),
            lambda t: globex.insert(t, [USER]),
            lambda t: globex.delete(t, w.ids),
            lambda t: globex.history(t),
            lambda t: globex.diff(t, 1, 2),
            lambda t: globex.fork(t),
            lambda t: globex.build_prompt(t, 100),
            lambda t: globex.compact(t),
            lambda t: globex.batch_end(t),
            lambda t: globex.verify(t),
            lambda t: globex.audit(context_id=t),
        ):
            with pytest.raises(ContextNotFoundError) as err:
                call(target)
            assert str(err.value) == f"no context with id {target}"
    assert cid not in {s.context_id for s in globex.contexts()}
    assert all(e.context_id != cid for e in globex.audit(limit=1000).entries)
    assert {e.context_id for e in acme.audit(limit=1000).entries} == {cid}
    assert service.store.visible(cid).version == 2  # globex wrote nothing
    # Choosing an id another tenant holds behaves as choosing an unused one: the chosen id
    # is scoped to the tenant (the context's id derived from both), and keeps naming it.
    for chosen in (cid, unknown):
        made = globex.create(context_id=chosen)
        assert made not in (cid, unknown)
        assert globex.visible(chosen).context_id == made == globex.visible(made).context_id
        with pytest.raises(ContextExistsError):  # its own, taken before
            globex.create(context_id=chosen)
    assert service.store.visible(cid).version == 2 and acme.visible(cid).version == 2


def test_an_idempotency_key_makes_a_retry_write_once(service):
    with service.client() as c:
        cid = c.create()
        path = f"/v1/contexts/{cid}/insert"
        body = {"messages": [USER]}
        first = raw(service, "POST", path, json=body, headers={"Idempotency-Key": "k-1"})
        again = raw(service, "POST", path, json=body, headers={"Idempotency-Key": "k-1"})
        assert first.status_code == again.status_code == 200
        assert first.json() == again.json() and again.headers["idempotent-replayed"] == "true"
        assert again.headers["etag"] == first.headers["etag"] == '"2"'
        assert c.visible(cid).version == 2
        other = raw(service, "POST", path, json={"messages": [ASSISTANT]},
                    headers={"Idempotency-Key": "k-1"})  # fmt: skip
        assert (
            other.status_code == 422 and other.json()["type"] == "/problems/idempotency-key-reused"
        )
        # Keys belong to a tenant: the same key from another tenant is another request.
        theirs = service.client("token-globex").create(idempotency_key="k-2")
        mine = c.create(idempotency_key="k-2")
        assert theirs != mine
        # A request that failed wrote nothing and keeps no claim: the fixed retry runs.
        bad = raw(service, "POST", path, json={"messages": [{"role": "nope"}]},
                  headers={"Idempotency-Key": "k-3"})  # fmt: skip
        assert bad.status_code == 422
        assert c.insert(cid, [ASSISTANT], idempotency_key="k-4").version == 3
        assert c.insert(cid, [ASSISTANT], idempotency_key="k-4").version == 3
        assert c.visible(cid).version == 3


def test_concurrent_retries_with_one_key_write_once(service):
    cid = service.client().create()
    body = {"messages": [USER]}

    def send(_: int) -> int:
        with service.client() as c:
            return c.insert(cid, [USER], idempotency_key="same").version

    with ThreadPoolExecutor(8) as pool:
        versions = list(pool.map(send, range(16)))
    assert set(versions) == {2}
    assert service.store.visible(cid).version == 2
    assert len(service.store.visible(cid).messages) == 1
    del body


def test_if_match_makes_writes_conditional(service):
    with service.client() as c:
        cid = c.create()
        c.insert(cid, [USER], expected_version=1)
        with pytest.raises(VersionConflictError):
            c.insert(cid, [USER], expected_version=1)
        r = raw(service, "POST", f"/v1/contexts/{cid}/insert", json={"messages": [USER]},
                headers={"If-Match": "banana"})  # fmt: skip
        assert r.status_code == 422
        r = raw(service, "POST", f"/v1/contexts/{cid}/batch-start", headers={"If-Match": '"2"'})
        assert r.status_code == 200 and r.headers["etag"] == '"3"'
        r = raw(service, "POST", f"/v1/contexts/{cid}/insert",
                json={"messages": [USER], "expected_version": 3}, headers={"If-Match": '"4"'})  # fmt: skip
        assert r.status_code == 422  # the two disagree
        assert service.store.visible(cid).version == 3


def test_racing_conditional_writers_one_wins_each_version(service):
    cid = service.client().create()
    wins = []
    lock = threading.Lock()

    def writer(n: int) -> None:
        with service.client() as c:
            for _ in range(10):
                head = c.visible(cid).version
                try:
                    c.insert(cid, [{"role": "user", "content": f"w{n}"}], expected_version=head)
                except VersionConflictError:
                    continue
                with lock:
                    wins.append(head)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(wins) == list(range(1, len(wins) + 1))  # one winner per version
    assert service.store.visible(cid).version == len(wins) + 1


def test_concurrent_unconditional_appends_lose_nothing(service):
    cid = service.client().create()

    def writer(n: int) -> list[str]:
        with service.client() as c:
            return [
                c.insert(cid, [{"role": "user", "content": f"{n}-{i}"}]).ids[0] for i in range(15)
            ]

    with ThreadPoolExecutor(6) as pool:
        ids = [i for batch in pool.map(writer, range(6)) for i in batch]
    seen = service.store.visible(cid)
    assert sorted(m.id for m in seen.messages) == sorted(ids) and len(ids) == 90
    assert seen.version == 91
    assert [h.version for h in service.store.history(cid)] == list(range(1, 92))


def test_problems_are_precise_and_write_nothing(service):
    c = service.client()
    cid = c.create()
    c.insert(cid, [USER])

    def post(path, body, **kw):
        return raw(service, "POST", f"/v1/contexts/{cid}/{path}", json=body, **kw)

    cases = [
        (post("insert", {"messages": [{"role": "user", "content": 5}]}), 422, "invalid-message"),
        (post("insert", {"messages": [RESULT]}), 422, "malformed-transcript"),
        (post("delete", {"ids": ["msg_nope"]}), 404, "message-not-found"),
        (post("replace", {"id": 7, "message": "x"}), 404, "message-not-found"),
        (post("insert", {"messages": [USER], "surprise": 1}), 422, "invalid-request"),
        (post("insert", {"messages": "no"}), 422, "invalid-request"),
        (post("batch-end", {}), 422, "unknown-batch"),
        (post("insert", {"messages": [USER], "expected_version": -5}), 409, "version-conflict"),
        (post("prompt", {"budget": 0}), 422, "invalid-request"),
        (raw(service, "GET", f"/v1/contexts/{cid}?at_version=99"), 422, "invalid-operation"),
        (raw(service, "GET", f"/v1/contexts/{cid}?at_time=yesterday"), 422, "invalid-request"),
        (raw(service, "GET", f"/v1/contexts/{cid}/diff?from_version=1"), 422, "invalid-request"),
        (
            raw(
                service,
                "POST",
                f"/v1/contexts/{cid}/insert",
                content=b"{not json",
                headers={"content-type": "application/json"},
            ),
            422,
            "invalid-request",
        ),
        (
            raw(service, "POST", f"/v1/contexts/{cid}/insert", content=b"x" * 70_000),
            413,
            "too-large",
        ),
        (raw(service, "PUT", f"/v1/contexts/{cid}"), 405, "method-not-allowed"),
        (  # NaN is not JSON: a client in another language could not read it back
            raw(
                service,
                "POST",
                f"/v1/contexts/{cid}/insert",
                content=b'{"messages": [{"role": "user", "content": "x", "metadata": {"a": NaN}}]}',
                headers={"content-type": "application/json"},
            ),
            422,
            "invalid-message",
        ),
        (
            raw(
                service,
                "POST",
                f"/v1/contexts/{cid}/insert",
                content=b'{"messages": []}',
                headers={"content-type": "application/x-www-form-urlencoded"},
            ),
            415,
            "unsupported-media-type",
        ),
        (raw(service, "GET", "/v1/nowhere"), 404, "not-found"),
    ]
    for response, status, slug in cases:
        assert response.status_code == status, (slug, response.text)
        assert response.headers["content-type"] == "application/problem+json"
        problem = response.json()
        assert problem["type"] == f"/problems/{slug}" and problem["status"] == status
        assert problem["detail"]
    assert service.store.visible(cid).version == 2  # none of them wrote


def test_the_client_raises_the_facades_typed_errors(service):
    c = service.client()
    cid = c.create()
    with pytest.raises(InvalidMessageError, match="role"):
        c.insert(cid, [{"role": "robot", "content": "x"}])
    with pytest.raises(MalformedTranscriptError):
        c.insert(cid, [RESULT])
    with pytest.raises(UnknownMessageError):
        c.delete(cid, ["msg_missing"])
    with pytest.raises(ContextNotFoundError):
        c.visible("not-a-uuid")


def test_openapi_is_served_at_a_stable_path(service):
    spec = raw(service, "GET", "/openapi.json", token=None).json()
    paths = spec["paths"]
    for path in ("/v1/contexts", "/v1/contexts/{context_id}", "/v1/audit",
                 "/v1/contexts/{context_id}/insert", "/v1/contexts/{context_id}/prompt"):  # fmt: skip
        assert path in paths
    assert {"delete", "replace", "compress", "batch-start", "batch-end", "fork", "compact",
            "history", "diff"} <= {p.rsplit("/", 1)[-1] for p in paths}  # fmt: skip


def test_operation_ids_are_the_operations_names(service):
    """OpenAPI operation ids read as the operations do (insert, visible), one per operation,
    not FastAPI's path-derived ones (insert_v1_contexts__context_id__insert_post)."""
    spec = raw(service, "GET", "/openapi.json", token=None).json()
    ids = [op["operationId"] for item in spec["paths"].values() for op in item.values()
           if isinstance(op, dict) and "operationId" in op]  # fmt: skip
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)
    assert {"insert", "visible", "batch_end", "record_call", "audit"} <= set(ids)
    assert all("_v1_" not in i and i.isidentifier() for i in ids), ids


def test_sdk_integrations_work_through_the_client(service):
    import asyncio

    from langchain_core.messages import AIMessage, HumanMessage

    from ctxstore.adapters.integrations.agents_session import CtxStoreSession
    from ctxstore.adapters.integrations.langchain_history import CtxStoreChatMessageHistory

    acme, globex = service.client(), service.client("token-globex")
    session = CtxStoreSession("s-1", acme)
    asyncio.run(
        session.add_items([USER, {"type": "function_call_output", "call_id": "c", "output": "1"}])
    )
    assert asyncio.run(session.get_items(limit=1)) == [
        {"type": "function_call_output", "call_id": "c", "output": "1"}
    ]
    # The compaction wrapper's suffix replacement, and its refusal after a change.
    snapshot = asyncio.run(session._get_compaction_snapshot(1))
    assert snapshot is not None and not snapshot.complete
    asyncio.run(session.add_items([USER]))
    assert asyncio.run(snapshot.replace_suffix(0, [])) is False
    snapshot = asyncio.run(session._get_compaction_snapshot(2))
    assert asyncio.run(snapshot.replace_suffix(0, [USER])) is True
    assert asyncio.run(session.get_items()) == [USER, USER]
    # The same session id under another tenant is another context.
    assert asyncio.run(CtxStoreSession("s-1", globex).get_items()) == []
    assert service.store.hooks.tenant_of(session.context_id) == "acme"
    history = CtxStoreChatMessageHistory("t-1", acme)
    sent = [HumanMessage("hi", id="1"), AIMessage("hello", id="2")]
    history.add_messages(sent)
    assert CtxStoreChatMessageHistory("t-1", acme).messages == sent


def test_every_problem_names_its_error(service):
    """401, 405, 413, 415 and a reused idempotency key carry `error` as the others do."""
    r = raw(service, "GET", "/v1/contexts", token="nope")
    assert r.status_code == 401 and r.json()["error"] == "NotAuthenticatedError"
    r = raw(service, "DELETE", "/v1/contexts")
    assert r.status_code == 405 and r.json()["error"] == "InvalidOperationError"
    r = raw(service, "POST", "/v1/contexts", headers={"Content-Type": "text/plain"}, content=b"x")
    assert r.status_code == 415 and r.json()["error"] == "InvalidOperationError"


def test_a_store_closed_under_a_running_service_ends_its_background_work_quietly(tmp_path, caplog):
    """Closing the store before the service stops (a shutdown out of order) must not
    leave the audit refresher logging a failure every few tenths of a second."""
    import logging

    from fastapi.testclient import TestClient

    from ctxstore import ContextStore
    from ctxstore.adapters.http import create_app
    from ctxstore.adapters.settings import ServiceConfig

    store = ContextStore.from_url(f"sqlite:///{tmp_path / 'closed.db'}")
    config = ServiceConfig(tokens={"t": "acme"}, audit_refresh_seconds=0.05)
    with caplog.at_level(logging.WARNING), TestClient(create_app(store, config)):
        refresher = next(t for t in threading.enumerate() if t.name == "ctxstore-audit")
        store.close()
        refresher.join(timeout=5)
        assert not refresher.is_alive()
    assert not [r for r in caplog.records if "refresh failed" in r.getMessage()]


def test_an_outage_of_the_idempotency_keys_is_a_503_and_a_stored_write_is_acknowledged(
    tmp_path, monkeypatch
):
    """The keys live in the database too: when it fails before the request runs, the answer
    is 503 (nothing stored); when it fails after the write, the write's own answer is sent."""
    from eventsourcing.persistence import OperationalError
    from fastapi.testclient import TestClient

    from ctxstore import ContextStore
    from ctxstore.adapters.http import create_app
    from ctxstore.adapters.settings import ServiceConfig
    from ctxstore.adapters.storage.idempotency import SQLIdempotencyKeys

    def down(*args, **kwargs):
        raise OperationalError("server closed the connection unexpectedly")

    with ContextStore.from_url(f"sqlite:///{tmp_path / 'keys.db'}") as store:
        app = create_app(store, ServiceConfig(tokens={"t": "acme"}))
        with TestClient(app, raise_server_exceptions=False) as http:
            auth = {"Authorization": "Bearer t"}
            cid = http.post("/v1/contexts", json={"name": "k"}, headers=auth).json()["context_id"]
            body = {"messages": [{"role": "user", "content": "hi"}]}
            with monkeypatch.context() as m:
                m.setattr(SQLIdempotencyKeys, "claim", down)
                refused = http.post(f"/v1/contexts/{cid}/insert", json=body,
                                    headers={**auth, "Idempotency-Key": "k1"})  # fmt: skip
            assert refused.status_code == 503 and refused.json()["error"] == "StoreUnavailableError"
            assert store.visible(cid).version == 1
            with monkeypatch.context() as m:
                m.setattr(SQLIdempotencyKeys, "complete", down)
                stored = http.post(f"/v1/contexts/{cid}/insert", json=body,
                                   headers={**auth, "Idempotency-Key": "k2"})  # fmt: skip
            assert stored.status_code == 200, stored.text
            assert store.visible(cid).version == 2
