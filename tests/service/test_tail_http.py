"""The live tail over HTTP: Server-Sent Events resumed by Last-Event-ID, a tenant's stream,
two service instances sharing one database, slow and too many clients."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from ctxstore.adapters.http.tail import TailHub
from ctxstore.adapters.settings import ServiceConfig
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.adapters.store.reply_stream import StreamPolicy
from ctxstore.domain.errors import ContextNotFoundError

from .conftest import TOKENS, Service, serve


def collect(it: Iterator, n: int, into: list) -> threading.Thread:
    def run() -> None:
        for item in it:
            into.append(item)
            if len(into) >= n:
                return

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_a_follower_sees_every_event_once_across_reconnects(service: Service):
    client = service.client()
    c = client.create(name="live")
    client.insert(c, {"role": "user", "content": "q"})
    seen: list = []
    t = collect(client.follow(c, after=0, idle=10), 12, seen)
    with client.stream(c, policy=StreamPolicy(interval=0)) as reply:
        for n in range(8):
            reply.add({"text": f"{n} "})
    t.join(10)
    assert [e.version for e in seen] == list(range(1, 13))
    assert [e.type for e in seen][:3] == ["create", "insert", "begin"]
    appended = [e.payload["deltas"] for e in seen if e.type == "append"]
    assert appended == [[{"text": f"{n} "}] for n in range(8)]
    # Resume after any event: exactly what follows it.
    again = list(client.follow(c, after=5, idle=0.5))
    assert [e.version for e in again] == list(range(6, 13))


def test_last_event_id_resumes_a_raw_stream(service: Service):
    client = service.client()
    c = client.create(name="raw")
    for n in range(3):
        client.insert(c, {"role": "user", "content": f"m{n}"})
    headers = {"Authorization": "Bearer token-acme", "Last-Event-ID": "2"}
    with httpx.stream("GET", f"{service.url}/v1/contexts/{c}/events", headers=headers,
                      timeout=httpx.Timeout(5, read=1)) as r:  # fmt: skip
        assert r.headers["content-type"].startswith("text/event-stream")
        ids = []
        try:
            for line in r.iter_lines():
                if line.startswith("id: "):
                    ids.append(int(line[4:]))
        except httpx.ReadTimeout:
            pass
    assert ids == [3, 4]


def test_another_tenant_cannot_follow_and_an_erased_context_ends_the_stream(service: Service):
    client = service.client()
    c = client.create(name="mine")
    with pytest.raises(ContextNotFoundError):
        # (idle bounds the wait for the answer too: long enough for a loaded machine)
        next(iter(service.client("token-globex").follow(c, after=0, idle=10)))
    seen: list = []
    errors: list = []

    def run() -> None:
        try:
            seen.extend(client.follow(c, after=0, idle=10))
        except ContextNotFoundError as exc:
            errors.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    time.sleep(0.3)
    client.erase(c, reason="test")
    t.join(10)
    assert [e.type for e in seen] == ["create"] and errors


def test_a_tenant_stream_carries_only_its_contexts(service: Service):
    acme, globex = service.client(), service.client("token-globex")
    headers = {"Authorization": "Bearer token-acme"}
    lines: list[str] = []

    def read() -> None:
        with httpx.stream("GET", f"{service.url}/v1/events?types=insert", headers=headers,
                          timeout=httpx.Timeout(5, read=3)) as r:  # fmt: skip
            try:
                for line in r.iter_lines():
                    lines.append(line)
                    if sum(x.startswith("data: ") for x in lines) == 2:
                        return
            except httpx.ReadTimeout:
                return

    t = threading.Thread(target=read, daemon=True)
    t.start()
    time.sleep(0.5)
    mine, theirs = acme.create(name="a"), globex.create(name="g")
    globex.insert(theirs, {"role": "user", "content": "secret"})
    acme.insert(mine, {"role": "user", "content": "one"})
    acme.insert(mine, {"role": "user", "content": "two"})
    t.join(10)
    data = [x for x in lines if x.startswith("data: ")]
    assert len(data) == 2 and all(str(mine) in x for x in data)
    assert not any("secret" in x or str(theirs) in x for x in lines)


def test_two_instances_on_one_database_tail_each_other(durable_url: str):
    config = ServiceConfig(tokens=TOKENS)
    with ContextStore.from_url(durable_url) as a, ContextStore.from_url(durable_url) as b:
        for url_a in serve(a, config):
            for url_b in serve(b, config):
                writer = Service(url_a, a).client()
                reader = Service(url_b, b).client()
                c = writer.create(name="shared")
                seen: list = []
                # From just after the creation: however late the reader's request starts,
                # it misses nothing (a follow from the head would start after what it missed).
                t = collect(reader.follow(c, after=1, idle=10), 3, seen)
                time.sleep(0.3)
                for n in range(3):
                    writer.insert(c, {"role": "user", "content": f"m{n}"})
                t.join(10)
                assert [e.version for e in seen] == [2, 3, 4]


@pytest.mark.slow  # fills a socket buffer
def test_a_client_that_stops_reading_is_dropped_and_too_many_are_refused(durable_url: str):
    config = ServiceConfig(tokens=TOKENS)
    with ContextStore.from_url(durable_url) as store:
        hub = TailHub(max_clients=1, send_timeout=0.5)
        for url in serve(store, config, tail=hub):
            client = Service(url, store).client()
            c = client.create(name="slow")
            big = "x" * 200_000
            sock = socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.sendall(f"GET /v1/contexts/{c}/events?after=0 HTTP/1.1\r\nHost: x\r\n"
                         "Authorization: Bearer token-acme\r\n\r\n".encode())  # fmt: skip
            time.sleep(0.3)
            with pytest.raises(Exception, match="503|live tails"):
                next(iter(client.follow(c, after=0, idle=1)))
            for _ in range(30):  # never read: the service's sends block, then it drops us
                client.insert(c, {"role": "user", "content": big})
            deadline = time.monotonic() + 10
            while (hub.dropped == 0 or hub.clients) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert hub.dropped == 1 and hub.clients == 0
            sock.close()


def test_a_bad_request_to_a_stream_is_refused_before_it_starts(service: Service):
    client = service.client()
    c = client.create(name="bad")
    base, auth = f"{service.url}/v1", {"Authorization": "Bearer token-acme"}
    for path, headers, status in (
        (f"/contexts/{c}/events", {"Last-Event-ID": "seven"}, 422),
        (f"/contexts/{c}/events?after=-1", {}, 422),
        ("/contexts/00000000-0000-0000-0000-000000000000/events", {}, 404),
        (f"/contexts/{c}/events", {"Authorization": "Bearer nope"}, 401),
        ("/events?types=nonsense", {}, 422),
    ):
        r = httpx.get(base + path, headers={**auth, **headers}, timeout=5)
        assert r.status_code == status, (path, r.text)
        assert r.headers["content-type"] == "application/problem+json"
