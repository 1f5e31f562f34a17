"""`ctxstore serve` over the servers CTXSTORE_SHARDS names (two PostgreSQL schemas here): a
tenant's client writes contexts that land on both, pages the merged audit with its text
cursor, follows the tenant's live tail and resumes it with Last-Event-ID; retention set
over HTTP reaches every server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ctxstore.adapters.http.client import CtxStoreClient
from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.shards.merged_audit import MergedAuditPage
from ctxstore.adapters.store.shards.store import ShardedStore

from ..conftest import TENANT_TOKENS, free_port, make_url

pytestmark = [pytest.mark.postgres]


@pytest.fixture
def shard_urls(tmp_path: Path, request: pytest.FixtureRequest) -> list[str]:
    return [make_url("postgres", tmp_path / str(n), request) for n in range(2)]


@pytest.fixture
def service(shard_urls: list[str], tmp_path: Path) -> Iterator[str]:
    port = free_port()
    env = {
        **os.environ,
        "CTXSTORE_SHARDS": json.dumps(shard_urls),
        "CTXSTORE_SERVICE__TOKENS": json.dumps(TENANT_TOKENS),
        "CTXSTORE_SERVICE__AUDIT_REFRESH_SECONDS": "0.2",
        "CTXSTORE_URL": f"sqlite:///{tmp_path / 'not-served.db'}",  # shards win without --url
    }
    log = (tmp_path / "serve.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctxstore", "serve", "--port", str(port), "--log-level", "warning"],
        env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the service did not start"
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        log.close()


def tail_events(url: str, last_event_id: str | None, count: int) -> list[tuple[str, dict]]:
    """The first `count` events of the tenant's live tail: (id, entry)."""
    headers = {"Authorization": "Bearer token-acme", "Accept": "text/event-stream"}
    if last_event_id is not None:
        headers["Last-Event-ID"] = last_event_id
    found: list[tuple[str, dict]] = []
    event_id = None
    with httpx.stream("GET", f"{url}/v1/events", headers=headers, timeout=20) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("id: "):
                event_id = line[4:]
            elif line.startswith("data: ") and event_id is not None:
                found.append((event_id, json.loads(line[6:])))
                if len(found) == count:
                    return found
    return found


def test_a_service_over_shards_serves_every_surface_of_them(
    service: str, shard_urls: list[str]
) -> None:
    with CtxStoreClient(service, token="token-acme") as client:
        ids = [client.create(name=f"c{n}") for n in range(12)]
        for cid in ids:
            client.insert(cid, [{"role": "user", "content": "hello"}])
        by_key = client.context_for_key("user-42")
        assert client.lookup_key("user-42") == by_key
        # The merged audit, paged with its text cursor: every event once.
        seen: list[tuple[str, int]] = []
        after: int | str = 0
        while True:
            page = client.audit(after=after, limit=5)
            assert isinstance(page, MergedAuditPage)
            seen += [(str(e.context_id), e.version) for e in page.entries]
            after = page.cursor
            if not page.more:
                break
        expected = {(str(c), v) for c in ids for v in (1, 2)} | {(str(by_key), 1)}
        assert sorted(seen) == sorted(expected)
        # The tenant's live tail from now: ids are merged cursors; resuming after the
        # first event gives the second next.
        got: list[list[tuple[str, dict]]] = []
        follower = threading.Thread(target=lambda: got.append(tail_events(service, None, 2)))
        follower.start()
        time.sleep(1.0)  # the tail has started (it begins at the audit head)
        client.insert(ids[0], [{"role": "user", "content": "later"}])
        client.insert(ids[1], [{"role": "user", "content": "later"}])
        follower.join(timeout=30)
        [(first_id, first), (second_id, second)] = got[0]
        assert first_id.startswith("s1:") and second_id.startswith("s1:")
        assert {first["context_id"], second["context_id"]} == {str(ids[0]), str(ids[1])}
        [(again_id, again)] = tail_events(service, first_id, 1)
        assert (again_id, again["context_id"]) == (second_id, second["context_id"])
        # Retention for the tenant over HTTP reaches every server.
        done = httpx.put(
            f"{service}/v1/retention", headers={"Authorization": "Bearer token-acme"},
            json={"expire_after_seconds": 86400},
        )  # fmt: skip
        assert done.status_code < 300, done.text
    with ShardedStore.from_urls(shard_urls, Settings(actor="t")) as sharded:
        assert len({sharded.shard_of(c) for c in ids}) == 2  # both servers hold contexts
        assert sharded.hooks.tenant_of(ids[0]) == "acme"
        for store in sharded.stores.values():
            policies = store.admin.retention_policies()
            assert [(p.scope, p.expire_after) for p in policies] == [("tenant:acme", 86400)]
