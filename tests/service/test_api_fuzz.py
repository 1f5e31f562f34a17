"""Schemathesis against the OpenAPI description: no request a client can send gets a 5xx,
and a refused request writes nothing.

Half of the generated requests that name a context are pointed at a real one (with messages
and an open batch), so bodies are fuzzed against live state, not only against 404s. Runs on
SQLite and PostgreSQL with a bounded number of examples per operation (CTXSTORE_FUZZ_EXAMPLES).
"""

from __future__ import annotations

import os
import random

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    status_code_conformance,
)

from ctxstore.adapters.http import create_app
from ctxstore.adapters.settings import ServiceConfig
from ctxstore.adapters.store.facade import ContextStore

pytestmark = pytest.mark.slow  # fuzzing the OpenAPI document

EXAMPLES = int(os.environ.get("CTXSTORE_FUZZ_EXAMPLES", "25"))
AUTH = {"Authorization": "Bearer fuzz-token"}


@pytest.fixture
def api_schema(durable_url):
    with ContextStore.from_url(durable_url) as store:
        cid = store.create(name="fuzzed", tenant="fuzz")
        store.insert(cid, [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        ])  # fmt: skip
        store.batch_start(cid)
        store.insert(cid, {"role": "assistant", "content": "It is sunny."})
        app = create_app(store, ServiceConfig(tokens={"fuzz-token": "fuzz"}, max_body_bytes=65536))
        schema = schemathesis.openapi.from_asgi("/openapi.json", app)
        schema.live_context = str(cid)
        schema.store = store
        yield schema


def test_no_request_gets_a_server_error(api_schema):
    # The live tail's streams do not end while the context lives: fuzzed through an in-process
    # transport, each would wait forever. Their refusals are tested in test_tail_http.py.
    operations = [
        op
        for op in (result.ok() for result in api_schema.get_all_operations())
        if not op.path.endswith("/events")
    ]
    assert len(operations) >= 20
    live, store = api_schema.live_context, api_schema.store
    sent = [0]
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
            database=None,
        )
        def check(case):
            params = case.path_parameters or {}
            # Half aimed at the live context; never its erasure, which would end the fuzzing.
            aim = random.Random(repr(case.body)).random() < 0.5 and case.method != "DELETE"
            if "context_id" in params and aim:
                params["context_id"] = live
            before = store.visible(live).version
            response = case.call(headers=AUTH)
            sent[0] += 1
            for (
                policy
            ) in store.admin.retention_policies():  # a policy would expire the live context
                store._core.retention.set(policy.scope, None, None, "fuzz")
            case.validate_response(
                response,
                checks=[not_a_server_error, status_code_conformance, content_type_conformance],
            )
            if response.status_code >= 400:
                kind = response.headers.get("content-type")
                kind = kind[0] if isinstance(kind, list) else kind
                assert kind == "application/problem+json", (
                    case.operation.label,
                    response.status_code,
                    response.text,
                )
                # A refused request wrote nothing.
                assert store.visible(live).version == before, (case.operation.label, response.text)

        check()
    print(f"{sent[0]} requests to {len(operations)} operations: no 5xx, no write on refusal")
