"""No public method of any surface lets a library's error out: with the store's tables
gone, every method of the store and of the async store raises a CtxStoreError (or
answers); against a service that cannot be reached, every method of the client does."""

from __future__ import annotations

import asyncio
import functools
import inspect
import sqlite3
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from ctxstore.adapters.http.client import CtxStoreClient
from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.admin import StoreAdmin
from ctxstore.adapters.store.async_store import AsyncContextStore
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.adapters.store.faults import public_methods
from ctxstore.adapters.store.parts import parts_of
from ctxstore.domain.errors import CtxStoreError, StoreUnavailableError

from ..conftest import free_port

USER = {"role": "user", "content": "hi"}
# A value for each required parameter a public method takes, by its name.
SAMPLES: dict[str, Any] = {
    "after": 0, "budget": 100, "call": {"request": {"model": "m"}, "error": "x"}, "data": b"x",
    "deltas": [{"text": "x"}],
    "expire_after": 86_400.0, "file_id": "file-1", "from_version": 1, "ids": [0],
    "key": "k", "lines": ['{"context_id": "x"}'], "media_type": "text/plain",
    "message": USER, "message_id": 0, "messages": [USER], "model": "gpt-4o", "number": 1,
    "pending_seconds": 60.0, "prompt_tokens": 1, "provider": "openai", "reason": "r",
    "query": "weather", "response": {"choices": []}, "scopes": ["read"], "sha256": "0" * 64,
    "summary": "s",
    "summary_id": 0, "tenant": "acme", "to_version": 2, "token_id": "t", "ttl_seconds": 60.0,
    "wake": lambda _hex: None,
}  # fmt: skip
SKIP = {"close"}


def calls_of(cls: type, target: Any, cid: Any) -> list[tuple[str, Callable[[], Any]]]:
    found: list[tuple[str, Callable[[], Any]]] = []
    for name in sorted(public_methods(cls)):
        if name in SKIP:
            continue
        method = getattr(target, name)
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for p in list(inspect.signature(method).parameters.values()):
            if p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            value = cid if p.name == "context_id" else SAMPLES[p.name]
            if p.kind is p.KEYWORD_ONLY:
                kwargs[p.name] = value
            else:
                args.append(value)
        found.append((name, functools.partial(method, *args, **kwargs)))
    return found


def untyped(call: Callable[[], Any], run: Callable[[Any], Any] = lambda x: x) -> str | None:
    """The class of a non-ctxstore error the call raised, else None."""
    try:
        found = run(call())
        if inspect.isgenerator(found) or hasattr(found, "__next__"):
            list(found)
    except CtxStoreError:
        return None
    except Exception as exc:  # noqa: BLE001 - what it is, is the finding
        return f"{type(exc).__module__}.{type(exc).__name__}: {exc}"[:200]
    return None


def gone_tables(path) -> None:
    with sqlite3.connect(path) as db:
        names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for name in names:
            db.execute(f'DROP TABLE IF EXISTS "{name}"')


def test_every_store_method_is_typed_when_the_tables_are_gone(tmp_path):
    db = tmp_path / "events.db"
    with ContextStore.from_url(f"sqlite:///{db}", Settings(actor="t")) as store:
        cid = store.create()
        store.insert(cid, [USER])
        gone_tables(db)
        parts_of(store).core.cache.drop(cid)
        raw = {name: untyped(call) for name, call in calls_of(ContextStore, store, cid)}
        admin = {name: untyped(call) for name, call in calls_of(StoreAdmin, store.admin, cid)}
    assert {n: e for n, e in raw.items() if e} == {}
    assert {n: e for n, e in admin.items() if e} == {}
    for name in (
        "set_retention",
        "retention_policies",
        "sweep",
        "sweeps",
        "tokens",
        "revoke_token",
    ):
        assert name in admin


def test_every_async_store_method_is_typed_when_the_tables_are_gone(tmp_path):
    db = tmp_path / "events.db"

    async def scenario() -> dict[str, str | None]:
        async with await AsyncContextStore.open(f"sqlite:///{db}", Settings(actor="t")) as s:
            cid = await s.create()
            await s.insert(cid, [USER])
            gone_tables(db)
            parts_of(s.sync).core.cache.drop(cid)
            raw: dict[str, str | None] = {}
            for name, call in calls_of(AsyncContextStore, s, cid):
                try:
                    found = call()
                    if inspect.isawaitable(found):
                        found = await found
                    if hasattr(found, "__aiter__"):
                        found = [x async for x in found]
                    raw[name] = None
                except CtxStoreError:
                    raw[name] = None
                except Exception as exc:  # noqa: BLE001
                    raw[name] = f"{type(exc).__module__}.{type(exc).__name__}: {exc}"[:200]
            return raw

    raw = asyncio.run(scenario())
    assert {n: e for n, e in raw.items() if e} == {}
    assert len(raw) >= 39


def test_every_client_method_is_typed_when_the_service_cannot_be_reached():
    port = free_port()  # nothing listens there
    with CtxStoreClient(f"http://127.0.0.1:{port}", token="t", retries=0, timeout=2) as client:
        raw = {n: untyped(call) for n, call in calls_of(CtxStoreClient, client, uuid.uuid4())}
        with pytest.raises(StoreUnavailableError, match="cannot be reached"):
            client.visible(uuid.uuid4())
    assert {n: e for n, e in raw.items() if e} == {}
    assert len(raw) >= 39
