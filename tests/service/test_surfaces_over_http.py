"""The operations the client lacked before the contract: erase, erasures, export, import,
replay, one call, usage per model; each answers as the store does in process, and each stays
within the caller's tenant."""

import json

import pytest
from typer.testing import CliRunner

from ctxstore.adapters.cli.app import app
from ctxstore.domain.errors import ContextNotFoundError, InvalidOperationError


def user(text):
    return {"role": "user", "content": text}


def TURN(n: int) -> list[dict]:
    return [
        user(f"question {n}"),
        {"role": "assistant", "tool_calls": [{"id": f"c{n}", "type": "function",
         "function": {"name": "look", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": f"c{n}", "content": f"found {n}"},
        {"role": "assistant", "content": f"answer {n}"},
    ]  # fmt: skip


def test_transfer_replay_calls_usage_and_erasure_over_http(service):
    with service.client() as acme:
        cid = acme.create(name="t")
        acme.insert(cid, [user("one"), {"role": "assistant", "content": "two"}])
        acme.batch_start(cid)
        acme.insert(cid, [user("three")])
        acme.batch_end(cid, to=0)
        prompt = acme.build_prompt(cid, 4000)
        acme.record_usage(cid, model="gpt-4o", prompt_tokens=prompt.tokens, sent=[])
        store = service.store
        assert list(acme.export_events(cid)) == list(store.export_events(cid))
        copy = acme.import_events(acme.export_events(cid), new_id=True)
        assert acme.visible(copy).messages == acme.visible(cid).messages
        steps = list(acme.replay(cid))
        assert [s.event.version for s in steps] == [s.event.version for s in store.replay(cid)]
        assert steps[-1].visible == store.visible(cid)
        assert [s.event.version for s in acme.replay(cid, from_version=2, to_version=3)] == [2, 3]
        assert acme.call(cid, -1) == store.call(cid, -1)
        assert acme.usage_report() == store.usage_report(tenant="acme")
        imported = acme.import_transcript('[{"role": "user", "content": "hi"}]', name="legacy")
        assert store.hooks.tenant_of(imported) == "acme"
        record = acme.erase(copy, reason="test")
        assert record.context_id == copy and [e.context_id for e in acme.erasures()] == [copy]
        with pytest.raises(ContextNotFoundError):
            acme.visible(copy)


def test_another_tenants_contexts_stay_out_of_reach(service):
    with service.client() as acme, service.client("token-globex") as globex:
        cid = acme.create(name="acme's")
        acme.insert(cid, [user("private")])
        acme.record_usage(cid, model="gpt-4o", prompt_tokens=5)
        for reach in (
            lambda: globex.export_events(cid),
            lambda: list(globex.replay(cid)),
            lambda: globex.call(cid, 1),
            lambda: globex.erase(cid, reason="not mine"),
            lambda: globex.usage_report(context_id=cid),
        ):
            with pytest.raises(ContextNotFoundError):
                reach()
        with pytest.raises(InvalidOperationError, match="another tenant"):
            globex.import_events(acme.export_events(cid), new_id=True)
        assert globex.usage_report() == [] and globex.erasures() == []
        acme.erase(cid, reason="done")
        assert globex.erasures() == []


def test_huge_numbers_in_bodies_are_422_not_500(service):
    with service.client() as acme:
        cid = acme.create()
        acme.insert(cid, [user("hi")])
        base = f"/v1/contexts/{cid}"
        for path, body in [
            ("fork", {"at_version": 2**63}),
            ("prompt", {"budget": 100, "at_version": 2**63}),
            ("prompt", {"budget": 2**64}),
            ("prompt", {"budget": 100, "resources": [{"id": "r", "tokens": 2**70}]}),
            ("usage", {"model": "m", "prompt_tokens": 2**63}),
            ("usage", {"model": "m", "prompt_tokens": 1, "version": 2**63}),
            ("batch-end", {"to": 2**63}),
            ("insert", {"messages": [user("x")], "after": 2**64}),
            ("delete", {"ids": [2**64]}),
            ("insert", {"messages": [user("x")], "expected_version": 2**63}),
        ]:
            response = acme.http.post(f"{base}/{path}", json=body)
            assert response.status_code == 422, (path, body, response.text)
        assert acme.visible(cid).version == 2


def test_expand_through_the_http_client_and_the_cli(service, tmp_path):
    client = service.client()
    cid = client.create()
    client.insert(cid, TURN(0) + TURN(1))
    ids = client.visible(cid).ids
    summary = client.compress(cid, ids[:4], "q0").ids[0]
    done = client.expand(cid, summary, expected_version=client.visible(cid).version)
    assert done.ids == ids[:4] and client.visible(cid).ids == ids

    url = f"sqlite:///{tmp_path / 'cli.db'}"
    runner = CliRunner()

    def cli(*args: str, stdin: str | None = None) -> str:
        result = runner.invoke(app, ["--url", url, *args], input=stdin)
        assert result.exit_code == 0, result.output
        return result.stdout

    cid = json.loads(cli("create", "--json"))["context_id"]
    cli("insert", cid, "--json", stdin="\n".join(json.dumps(m) for m in TURN(0)))
    summary = json.loads(cli("compress", cid, "#0", "#1", "#2", "--summary", "s", "--json"))
    out = json.loads(cli("expand", cid, summary["ids"][0], "--json"))
    assert len(out["ids"]) == 3


def test_native_shapes_and_recorded_responses_over_http_and_the_cli(service, tmp_path):
    items = [
        {"role": "user", "content": "Weather?", "type": "message"},
        {"type": "function_call", "call_id": "c1", "name": "w", "arguments": "{}", "id": "fc_1"},
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
    ]
    client = service.client()
    cid = client.create(model="gpt-5")
    client.insert(cid, items, format="openai-responses")
    assert client.visible(cid).to_responses() == items
    reply = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
             "content": [{"type": "text", "text": "Sunny."}], "stop_reason": "end_turn",
             "usage": {"input_tokens": 7, "output_tokens": 2}}  # fmt: skip
    claude = client.create()
    client.insert(claude, {"role": "user", "content": [{"type": "text", "text": "hi"}]},
                  format="anthropic")  # fmt: skip
    client.record_response(claude, reply)
    assert client.visible(claude).to_anthropic()["messages"][-1] == {
        "role": "assistant", "content": [{"type": "text", "text": "Sunny."}]}  # fmt: skip
    assert client.calls(claude)[-1].prompt_tokens == 7

    url = f"sqlite:///{tmp_path / 'cli.db'}"
    runner = CliRunner()
    made = runner.invoke(app, ["--url", url, "create", "--json"])
    local = json.loads(made.stdout)["context_id"]
    runner.invoke(app, ["--url", url, "insert", local, "--content", "hi", "--role", "user"])
    done = runner.invoke(app, ["--url", url, "record-response", local], input=json.dumps(reply))
    assert done.exit_code == 0, done.output
    shown = runner.invoke(app, ["--url", url, "show", local, "--format", "anthropic"])
    assert json.loads(shown.stdout)["messages"][-1]["content"] == [
        {"type": "text", "text": "Sunny."}
    ]


def test_the_debuggers_reads_over_http_answer_as_the_store_does(service):
    from ctxstore.domain.conversions import convert

    with service.client() as acme, service.client("token-globex") as globex:
        cid = acme.create(name="debug")
        acme.insert(cid, TURN(0))
        acme.record_usage(cid, model="gpt-4o", prompt_tokens=30)
        acme.insert(cid, TURN(1))
        acme.record_usage(cid, model="gpt-4o", prompt_tokens=60, latency=0.25)
        store = service.store
        assert acme.call(cid, 2).latency_ms == 250.0
        for bad in (-1, 10**9, "fast"):
            body = {"model": "m", "prompt_tokens": 1, "latency": bad}
            assert acme.http.post(f"/v1/contexts/{cid}/usage", json=body).status_code == 422
        assert acme.call_diff(cid, -1) == store.call_diff(cid, 2)
        assert len(acme.call_diff(cid, 2).added) == 4
        base = f"/v1/contexts/{cid}"
        page = acme.http.get(f"{base}/stored-events", params={"after": 2, "limit": 3}).json()
        assert [e["version"] for e in page] == [3, 4, 5]
        assert [e["type"] for e in page] == ["usage", "insert", "usage"]
        assert page[1]["payload"]["messages"][0]["content"] == "question 1"
        assert page[1]["what"] == "user: question 1 (+3 more)"
        bare = acme.http.get(f"{base}/stored-events", params={"after": 3, "payload": "false"})
        assert [(e["payload"], e["what"]) for e in bare.json()] == [
            ({}, page[1]["what"]),
            ({}, page[2]["what"]),
        ]
        shown = store.visible(cid, at_version=2)
        for shape in ("openai-chat", "openai-responses", "anthropic"):
            got = acme.http.get(f"{base}/shaped", params={"shape": shape, "at_version": 2})
            assert got.json()["payload"] == convert(shown.messages, shape).payload, shape
        one = acme.http.get(f"{base}/shaped", params={"ids": [shown.ids[0]]}).json()
        assert one == {"shape": "stored", "payload": [user("question 0")], "omitted": []}
        sent = acme.http.get(f"{base}/shaped", params={"call": 1, "shape": "openai-chat"})
        assert (
            sent.json()["payload"]
            == convert(store.call(cid, 1).messages or [], "openai-chat").payload
        )
        assert acme.http.get(f"{base}/shaped", params={"shape": "xml"}).status_code == 422
        for path in ("stored-events", "shaped", "calls/1/diff"):
            assert globex.http.get(f"{base}/{path}").status_code == 404, path
