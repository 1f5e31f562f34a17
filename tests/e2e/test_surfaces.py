"""Every operation of the contract has an HTTP route, a client method and a CLI command,
unless it is exempt here with the reason; a new operation without them fails this test."""

import inspect

from ctxstore.adapters.cli.app import COMMANDS
from ctxstore.adapters.http import create_app
from ctxstore.adapters.http.client import CtxStoreClient
from ctxstore.adapters.store.contract import ContextOperations
from ctxstore.adapters.store.facade import ContextStore

C = "/v1/contexts/{context_id}"
# operation: (HTTP method and path, CLI command)
SURFACES = {
    "create": ("POST /v1/contexts", "create"),
    "context_for_key": ("POST /v1/contexts/by-key", "key"),
    "lookup_key": ("GET /v1/contexts/by-key", "key"),  # key --no-create
    "contexts": ("GET /v1/contexts", "contexts"),
    "fork": (f"POST {C}/fork", "fork"),
    "erase": (f"DELETE {C}", "erase"),
    "erasures": ("GET /v1/erasures", "erasures"),
    "insert": (f"POST {C}/insert", "insert"),
    "delete": (f"POST {C}/delete", "delete"),
    "replace": (f"POST {C}/replace", "replace"),
    "compress": (f"POST {C}/compress", "compress"),
    "expand": (f"POST {C}/expand", "expand"),
    "batch_start": (f"POST {C}/batch-start", "batch-start"),
    "batch_end": (f"POST {C}/batch-end", "batch-end"),
    "record_usage": (f"POST {C}/usage", "usage"),
    "record_response": (f"POST {C}/responses", "record-response"),
    "record_call": (f"POST {C}/calls", "record-call"),
    "compact": (f"POST {C}/compact", "compact"),
    "begin": (f"POST {C}/begin", "begin"),
    "append": (f"POST {C}/append", "append"),
    "finish": (f"POST {C}/finish", "finish"),
    "abandon": (f"POST {C}/abandon", "abandon"),
    "stream": (f"POST {C}/begin", "stream"),  # a handle over begin, append and finish
    "follow": (f"GET {C}/events", "tail"),
    "visible": (f"GET {C}", "show"),
    "build_prompt": (f"POST {C}/prompt", "prompt"),
    "history": (f"GET {C}/history", "log"),
    "batches": (f"GET {C}/batches", "batches"),
    "diff": (f"GET {C}/diff", "diff"),
    "token_series": (f"GET {C}/tokens", "tokens"),
    "calls": (f"GET {C}/calls", "calls"),
    "call": (f"GET {C}/calls/{{number}}", "call"),  # and show --call N
    "call_diff": (f"GET {C}/calls/{{number}}/diff", "call"),  # call N --diff
    "replay": (f"GET {C}/replay", "replay"),
    "usage_report": ("GET /v1/usage", "usage-report"),
    "verify": (f"GET {C}/verify", "verify"),
    "audit": ("GET /v1/audit", "audit"),
    "export_events": (f"GET {C}/export", "export"),
    "import_events": ("POST /v1/contexts/import", "import"),
    "import_transcript": ("POST /v1/contexts/import-transcript", "import"),  # import --openai
}
EXEMPT = {
    "close": "the lifetime of a connection, not an operation on contexts",
}


def operations() -> set[str]:
    return {
        name
        for name, member in inspect.getmembers(ContextOperations)
        if inspect.isfunction(member) and not name.startswith("_")
    }


def test_every_operation_is_on_every_surface():
    store = ContextStore.from_url("memory://")
    app = create_app(store)
    routes = {
        f"{method.upper()} {path}"
        for path, methods in app.openapi()["paths"].items()
        for method in methods
    }
    commands = {name for _, name in COMMANDS}
    missing = []
    for op in sorted(operations()):
        if op in EXEMPT:
            continue
        if op not in SURFACES:
            missing.append(f"{op}: no surface listed (add it to SURFACES, or EXEMPT with why)")
            continue
        route, command = SURFACES[op]
        if route not in routes:
            missing.append(f"{op}: no route {route}")
        if command not in commands:
            missing.append(f"{op}: no CLI command {command}")
        for impl in (ContextStore, CtxStoreClient):
            if not callable(getattr(impl, op, None)):
                missing.append(f"{op}: {impl.__name__} lacks it")
    store.close()
    assert not missing, missing


def test_the_check_would_catch_an_operation_without_surfaces():
    assert set(SURFACES) | set(EXEMPT) == operations()
    assert all(reason for reason in EXEMPT.values())
