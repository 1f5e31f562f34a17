"""Every operation the spec declares (adapters/store/spec.py) is on every face — the store in
process, the async store, the HTTP client, the sharded store — with its HTTP route, its
scope and its CLI command; and no face offers a public name the spec does not hold, beyond
the few each face lists below with why. A new operation missing anywhere fails here."""

import inspect
from typing import Protocol

import pytest

from ctxstore.adapters.cli.app import COMMANDS
from ctxstore.adapters.http import create_app
from ctxstore.adapters.http.client import CtxStoreClient
from ctxstore.adapters.http.scopes import ADMITS, BEYOND_THE_CONTRACT, needed
from ctxstore.adapters.store.async_store import AsyncContextStore
from ctxstore.adapters.store.contract import OPERATIONS, ContextOperations
from ctxstore.adapters.store.contract_async import AsyncContextOperations
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.adapters.store.hooks import HOOKS, StoreHooks
from ctxstore.adapters.store.shards.hooks import ShardedHooks
from ctxstore.adapters.store.shards.store import ShardedStore
from ctxstore.adapters.store.spec import operation, operations_of
from ctxstore.adapters.store.store_hooks import Hooks

LIFETIME = {"closed", "settings", "url", "tokenizers", "context_uuid"}  # what a store is
# What each face offers beyond the contract and the stores' hooks, and why.
BEYOND = {
    ContextStore: {
        "from_url": "opens a store",
        "setup": "creates the schema (the CLI's migrate)",
    },
    AsyncContextStore: {
        "open": "opens a store",
        "sync": "the store in process it wraps",
        "visible_messages": "the hook an integration awaits on the loop (its newest items)",
    },
    CtxStoreClient: {"health": "the service's liveness, not an operation on contexts"},
    ShardedStore: {
        "from_urls": "opens the servers",
        "admin": "administration across the servers",
        "move": "moves a context to another server (the CLI's move)",
        "shard_of": "names the server holding a context",
        "store_of": "that server's store",
    },
}
STUBS = (ContextOperations, AsyncContextOperations, StoreHooks)  # declarations only
# Where each face that holds events keeps its hooks (`face.hooks`: off its public names).
HOOKS_OF = {ContextStore: Hooks, ShardedStore: ShardedHooks}
FACES = list(BEYOND)


def public(face: type) -> set[str]:
    return {n for n in dir(face) if not n.startswith("_")}


def implemented(face: type, name: str) -> bool:
    """Whether the face has the operation itself: not only the declaration it inherits
    from the Protocol it declares (a stub, which does nothing)."""
    found = inspect.getattr_static(face, name, None)
    if not callable(found):
        return False
    # (the faults' wrappers copy inherited methods into the face: look through them)
    declared_by = inspect.unwrap(found).__qualname__.split(".")[0]
    return declared_by not in {s.__name__ for s in STUBS}


@pytest.mark.parametrize("face", FACES, ids=lambda f: f.__name__)
def test_every_operation_is_on_every_face(face):
    missing = [n for n in OPERATIONS if not implemented(face, n)]
    if face in HOOKS_OF:
        missing += [n for n in HOOKS if not implemented(HOOKS_OF[face], n)]
    assert not missing, f"{face.__name__} lacks {missing}"


@pytest.mark.parametrize("face", FACES, ids=lambda f: f.__name__)
def test_no_face_offers_what_the_spec_does_not_hold(face):
    known = set(OPERATIONS) | LIFETIME | set(BEYOND[face])
    assert not public(face) - known, f"{face.__name__} offers {sorted(public(face) - known)}"


def test_the_async_store_awaits_every_operation():
    for name in OPERATIONS:
        member = getattr(AsyncContextStore, name)
        if name == "follow":  # an async iterator: calling it awaits nothing
            assert inspect.isasyncgenfunction(member) or not inspect.iscoroutinefunction(member)
        else:
            assert inspect.iscoroutinefunction(member), f"AsyncContextStore.{name} is not async"


def test_every_operation_has_its_route_scope_and_command():
    with ContextStore.from_url("memory://") as store:
        paths = create_app(store).openapi()["paths"]
    routes = {(m.upper(), p) for p, methods in paths.items() for m in methods}
    commands = {name for _, name in COMMANDS}
    missing = []
    for op in OPERATIONS.values():
        if op.route is None or op.cli is None:
            assert op.reason, f"{op.name}: no route or command, and no reason given"
        if op.route is not None:
            if (op.method, op.path) not in routes:
                missing.append(f"{op.name}: no route {op.route}")
            elif op.scope and needed(op.method, op.path) != ADMITS[op.scope]:
                missing.append(f"{op.name}: {op.route} is not admitted by {op.scope}")
        if op.cli is not None and op.cli not in commands:
            missing.append(f"{op.name}: no CLI command {op.cli}")
    assert not missing, missing
    # ... and no route of the service is outside the spec and the listed few
    declared = {(op.method, op.path) for op in OPERATIONS.values() if op.route}
    others = routes - declared - set(BEYOND_THE_CONTRACT) - {("GET", "/health")}
    assert not others, f"routes outside the spec: {sorted(others)}"


def test_hooks_never_reach_http_or_the_command_line():
    assert all(op.route is None and op.cli is None and op.reason for op in HOOKS.values())
    assert set(HOOKS).isdisjoint(OPERATIONS)


def test_a_method_without_a_declaration_is_an_error():
    class Declared(Protocol):
        @operation("read", None, None, reason="a test")
        def fine(self, context_id: str) -> int: ...

        def forgotten(self, context_id: str) -> int: ...

    with pytest.raises(TypeError, match="forgotten has no @operation"):
        operations_of(Declared)


def test_routed_by_default_exactly_when_the_first_parameter_is_a_context():
    for op in OPERATIONS.values():
        first = list(inspect.signature(getattr(ContextOperations, op.name)).parameters)[1:2]
        if op.routed:
            assert first == ["context_id"], op.name
