"""Contexts spread over three PostgreSQL servers this test starts on their own ports
(bench/pg_cluster.py), never the shared server: placement, routing, the merged audit,
forks across servers and moving a context while writers go on."""

from __future__ import annotations

import base64
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.adapters.store.shards.store import ShardedStore
from ctxstore.domain.errors import ContextNotFoundError, CtxStoreError, InvalidOperationError

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import pg_cluster

pytestmark = [pytest.mark.postgres, pytest.mark.slow]  # slow: three servers of its own
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


@pytest.fixture(scope="module")
def servers() -> Iterator[list[str]]:
    if not pg_cluster.available():
        pytest.fail("PostgreSQL 15's binaries are needed to start three servers")
    with (
        pg_cluster.private_cluster() as a,
        pg_cluster.private_cluster() as b,
        pg_cluster.private_cluster() as c,
    ):
        yield [a.url, b.url, c.url]


@pytest.fixture
def sharded(servers: list[str]) -> Iterator[ShardedStore]:
    # A schema per test on each server keeps the tests apart.
    schema = f"s_{time.monotonic_ns() % 10**12}"
    for url in servers:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
    urls = [f"{u}?schema={schema}" for u in servers]
    with ShardedStore.from_urls(urls, Settings(actor="t")) as s:
        yield s


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def rows_of(store: ContextStore, cid: Any) -> int:
    return len(store._storage.recorder.select_events(cid, limit=10_000))


def test_contexts_are_placed_evenly_and_live_on_one_server(sharded: ShardedStore) -> None:
    ids = [sharded.create(name=f"c{i}") for i in range(600)]
    placed = Counter(sharded.shard_of(c) for c in ids)
    assert set(placed) == set(sharded.names)
    for n in placed.values():
        assert abs(n - 200) <= 50, placed  # rendezvous hashing: ~200 each (4 sigma)
    for cid in ids[:30]:
        sharded.insert(cid, [user("hello")])
        home = sharded.shard_of(cid)
        for name, store in sharded.stores.items():
            assert rows_of(store, cid) == (2 if name == home else 0)
    # A second router over the same servers finds every context where the first put it.
    with ShardedStore.from_urls([s.url for s in sharded.stores.values()]) as other:
        assert other.names == sharded.names
        assert all(other.shard_of(c) == sharded.shard_of(c) for c in ids[:50])


def test_operations_route_by_context(sharded: ShardedStore) -> None:
    cid = sharded.create(name="routed", model="gpt-4o")
    w = sharded.insert(cid, [user("a"), user("b"), user("c")])
    sharded.replace(cid, w.ids[0], user("a, edited"))
    sharded.compress(cid, w.ids[:2], "a and b")
    assert [m["content"] for m in sharded.hooks.visible_messages(cid)][-1] == "c"
    assert [h.type for h in sharded.history(cid)] == ["create", "insert", "replace", "compress"]
    assert sharded.diff(cid, 2, 4).removed
    assert sharded.verify(cid).ok
    with pytest.raises(ContextNotFoundError):
        sharded.visible("00000000-0000-4000-8000-000000000000")
    assert not hasattr(sharded, "no_such_method")  # every operation is declared


def test_the_merged_audit_sees_every_event_of_every_server_once(sharded: ShardedStore) -> None:
    ids = [sharded.create(name=f"a{i}") for i in range(12)]
    for round_ in range(4):
        for cid in ids:
            sharded.insert(cid, [user(f"r{round_}")])
    expected = {(str(c), v) for c in ids for v in range(1, 6)}
    seen: list[tuple[str, int]] = []
    after: str | int = ""
    while True:
        page = sharded.audit(after=after, limit=7)
        seen.extend((str(e.context_id), e.version) for e in page.entries)
        if not page.entries:
            break
        after = page.cursor
    assert len(seen) == len(set(seen)) and set(seen) == expected
    # New events after the cursor, on any server, come next.
    sharded.insert(ids[5], [user("late")])
    page = sharded.audit(after=after)
    assert [(str(e.context_id), e.version) for e in page.entries] == [(str(ids[5]), 6)]
    with pytest.raises(InvalidOperationError):
        sharded.audit(after="s1:nosuchserver=3")


def test_a_fork_lands_on_its_own_server_with_its_attachments(sharded: ShardedStore) -> None:
    cid = sharded.create(name="source", tenant="acme")
    ref = sharded.put_blob(PNG, "image/png", tenant="acme")
    sharded.insert(cid, [{"role": "user", "content": [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": ref.uri()}}]}])  # fmt: skip
    sharded.insert(cid, [user("later")])
    forks = [sharded.fork(cid, at_version=2) for _ in range(8)]
    elsewhere = [f for f in forks if sharded.shard_of(f) != sharded.shard_of(cid)]
    assert elsewhere, "eight forks all hashed to the source's server"
    fork = elsewhere[0]
    source_seen = [m.model_dump(mode="json", exclude_none=True) for m in
                   sharded.visible(cid, at_version=2).messages]  # fmt: skip
    assert [m.model_dump(mode="json", exclude_none=True)
            for m in sharded.visible(fork).messages] == source_seen  # fmt: skip
    target = sharded.store_of(fork)
    assert target.blob(ref.sha256, tenant="acme").data == PNG
    assert sharded.hooks.tenant_of(fork) == "acme"


def test_moving_a_context_pauses_only_its_own_writers(sharded: ShardedStore) -> None:
    moving, other = sharded.create(name="moving"), sharded.create(name="other")
    for i in range(50):
        sharded.insert(moving, [user(f"before {i}")])
    stop = threading.Event()
    acked: dict[str, list[int]] = {"moving": [], "other": []}
    failures: list[str] = []

    def write(cid: Any, key: str) -> None:
        with ShardedStore.from_urls([s.url for s in sharded.stores.values()]) as router:
            router.shard_of(cid)  # cached: after the move it is stale
            i = 0
            while not stop.is_set():
                try:
                    acked[key].append(router.insert(cid, [user(f"{key} {i}")]).version)
                except CtxStoreError as exc:
                    failures.append(f"{key}: {exc!r}")
                i += 1

    threads = [
        threading.Thread(target=write, args=a) for a in ((moving, "moving"), (other, "other"))
    ]
    for t in threads:
        t.start()

    def until(done: Any) -> None:
        deadline = time.monotonic() + 60
        while not done() and time.monotonic() < deadline and not failures:
            time.sleep(0.01)

    until(lambda: len(acked["moving"]) >= 5 and len(acked["other"]) >= 5)
    source = sharded.shard_of(moving)
    to = next(n for n in sharded.names if n != source)
    assert sharded.move(moving, to) == source
    moved_at = len(sharded.history(moving))
    until(lambda: max(acked["moving"]) > moved_at + 5)
    stop.set()
    for t in threads:
        t.join()
    assert not failures, failures[:3]
    assert sharded.shard_of(moving) == to
    assert rows_of(sharded.stores[source], moving) == 0
    history = sharded.history(moving)
    assert [h.version for h in history] == list(range(1, len(history) + 1))
    assert set(acked["moving"]) <= {h.version for h in history}  # nothing acknowledged lost
    assert max(acked["moving"]) > moved_at + 5  # writes went on after the move, on the target
    assert sharded.verify(moving).ok
    assert acked["other"] == list(range(acked["other"][0], acked["other"][-1] + 1))


def test_the_command_line_lists_servers_and_moves_a_context(
    sharded: ShardedStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from typer.testing import CliRunner

    from ctxstore.adapters.cli.app import app

    cid = sharded.create(name="cli")
    sharded.insert(cid, [user("hello")])
    monkeypatch.setenv("CTXSTORE_SHARDS", ",".join(s.url for s in sharded.stores.values()))
    runner = CliRunner()
    listed = runner.invoke(app, ["shards", "--json"])
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.stdout)
    assert [r["name"] for r in rows] == sharded.names
    assert sum(r["contexts"] for r in rows) == 1
    source = sharded.shard_of(cid)
    to = next(n for n in sharded.names if n != source)
    moved = runner.invoke(app, ["move", str(cid), "--to", to, "--json"])
    assert moved.exit_code == 0, moved.output
    assert json.loads(moved.stdout) == {"context": str(cid), "from": source, "to": to}
    sharded.directory.forget(cid)
    assert sharded.shard_of(cid) == to and len(sharded.history(cid)) == 2
    refused = runner.invoke(app, ["move", str(cid), "--to", "nosuchserver"])
    assert refused.exit_code != 0 and "nosuchserver" in refused.stderr
    assert "Traceback" not in refused.output


def test_an_encrypted_context_moves_and_its_old_key_is_destroyed(servers: list[str]) -> None:
    schema = f"e_{time.monotonic_ns() % 10**12}"
    for url in servers:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
    key = base64.b64encode(b"k" * 32).decode()
    settings = Settings(actor="t", encryption_key=key)
    with ShardedStore.from_urls([f"{u}?schema={schema}" for u in servers], settings) as s:
        cid = s.create(name="secret")
        s.insert(cid, [user("the launch code is 0000")])
        source = s.shard_of(cid)
        to = next(n for n in s.names if n != source)
        s.move(cid, to)
        assert [m.content for m in s.visible(cid).messages][-1] == "the launch code is 0000"
        from ctxstore.adapters.keys.cipher import key_name

        old_vault = s.stores[source]._storage.keys.keys.vault  # type: ignore[union-attr]
        new_vault = s.stores[to]._storage.keys.keys.vault  # type: ignore[union-attr]
        assert old_vault.rows(key_name(cid)) == []
        assert new_vault.rows(key_name(cid)) != []


def test_a_move_takes_the_contexts_retention_with_it(sharded: ShardedStore) -> None:
    """The context's own policy goes to its new server; its policy row leaves the old one
    (and a checkpoint there, with the rest of its rows)."""
    cid = sharded.create(name="bounded")
    for n in range(40):
        sharded.insert(cid, [user(f"m{n}")])
    source = sharded.shard_of(cid)
    home = sharded.stores[source]
    home.admin.set_retention(None, keep_latest=500, context_id=cid, yes=True)
    rows = home._storage.retention
    assert rows is not None
    to = next(n for n in sharded.names if n != source)
    sharded.move(cid, to)
    assert [m.content for m in sharded.visible(cid).messages][-1] == "m39"
    assert sharded.verify(cid).ok
    assert not [p for p in rows.policies() if p[0] == f"context:{cid.hex}"]
    moved = sharded.stores[to].admin.retention_policies()
    assert [(p.scope, p.keep_latest) for p in moved] == [(f"context:{cid.hex}", 500)]


def read_all(
    sharded: ShardedStore, after: str | int, limit: int = 5
) -> tuple[list[Any], str | int]:
    seen: list[tuple[str, int]] = []
    while True:
        page = sharded.audit(after=after, limit=limit)
        seen.extend((str(e.context_id), e.version) for e in page.entries)
        after = page.cursor
        if not page.more and not page.entries:
            return seen, after


def test_a_moved_contexts_events_are_audited_once(sharded: ShardedStore) -> None:
    """A cursor that read part of a context's events before it moved (there and back, and
    on again) reads the rest after, each event once; a fresh cursor reads every event once."""
    cid = sharded.create(name="travels")
    others = [sharded.create(name=f"o{i}") for i in range(4)]
    for n in range(6):
        sharded.insert(cid, [user(f"m{n}")])
    page = sharded.audit(limit=3)  # some events read before the move
    seen = [(str(e.context_id), e.version) for e in page.entries]
    after: str | int = page.cursor
    first = sharded.shard_of(cid)
    route = [n for n in sharded.names if n != first] + [first]
    for hop, to in enumerate(route):
        more, after = read_all(sharded, after, limit=2) if hop == 1 else ([], after)
        seen += more
        sharded.move(cid, to)
        sharded.insert(cid, [user(f"after hop {hop}")])
        sharded.insert(others[hop], [user("elsewhere")])
    more, after = read_all(sharded, after)
    seen += more
    expected = {(str(cid), v) for v in range(1, 8 + len(route))} | {(str(o), 1) for o in others}
    expected |= {(str(o), 2) for o in others[: len(route)]}
    assert sorted(seen) == sorted(expected), "an event was skipped or read twice"
    assert len(seen) == len(set(seen))
    everything, _ = read_all(sharded, "")
    assert sorted(everything) == sorted(expected)
    own = sharded.audit(context_id=cid, limit=100).entries
    assert sorted(e.version for e in own) == list(range(1, 8 + len(route)))
    sharded.erase(cid, reason="the user asked")
    for store in sharded.stores.values():  # its audit rows go from every server it was on
        assert not store.audit(context_id=cid).entries


def test_a_failed_copy_leaves_the_context_where_it_was(
    sharded: ShardedStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    cid = sharded.create(name="stays")
    sharded.insert(cid, [user("kept")])
    source = sharded.shard_of(cid)
    to = next(n for n in sharded.names if n != source)
    target = sharded.stores[to]

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise CtxStoreError("the copy failed")

    monkeypatch.setattr(target, "export_events", broken)
    with pytest.raises(CtxStoreError):
        sharded.move(cid, to)
    monkeypatch.undo()
    assert sharded.shard_of(cid) == source
    assert rows_of(target, cid) == 0
    sharded.insert(cid, [user("still here")])
    seen, _ = read_all(sharded, "")
    assert sorted(v for c, v in seen if c == str(cid)) == [1, 2, 3]
