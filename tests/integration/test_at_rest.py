"""Encryption and compression at rest: the raw database holds no message content."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from eventsourcing.cryptography import AESCipher
from pydantic import SecretStr

from ctxstore import StoreUnavailableError
from ctxstore.adapters.settings import ServiceConfig, Settings
from ctxstore.adapters.store.facade import ContextStore

MARKER = "PLAINTEXT-MARKER-7c1e"
CHINESE = "机密的对话内容"


def secrets_everywhere(store: ContextStore) -> None:
    """Write content through every path that stores it: events, snapshots, compaction,
    forks, usage records with sent messages."""
    cid = store.create(name="at rest", metadata={"k": "v"})
    for i in range(40):  # past the snapshot interval
        store.insert(cid, [
            {"role": "user", "content": f"{MARKER} question {i} {CHINESE}. more words"},
            {"role": "assistant", "content": f"{MARKER} answer {i}."},
        ])  # fmt: skip
    store.compact(cid)
    prompt = store.build_prompt(cid, 4000)
    store.record_usage(cid, model="m", prompt_tokens=10, prompt=prompt)
    store.fork(cid)
    assert store.audit(limit=1000).entries


def raw_bytes(url: str, store: ContextStore) -> bytes:
    """Everything the database holds for this store, as bytes."""
    if url.startswith("sqlite"):
        path = Path(url.removeprefix("sqlite:///"))
        return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))
    dsn, _, schema_query = url.partition("?schema=")
    chunks = []
    with psycopg.connect(dsn) as conn:
        tables = conn.execute(
            "SELECT table_schema, table_name FROM information_schema.tables "
            "WHERE table_schema = %s",
            (schema_query or "public",),
        ).fetchall()
        assert len(tables) >= 5, tables  # events, snapshots, audit, tracking, idempotency
        for schema, table in tables:
            for (row,) in conn.execute(f'SELECT t::text FROM "{schema}"."{table}" t'):
                chunks.append(row.encode())
            cols = conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = %s "
                "AND table_name = %s AND data_type = 'bytea'",
                (schema, table),
            ).fetchall()
            for (col,) in cols:
                for (value,) in conn.execute(f'SELECT "{col}" FROM "{schema}"."{table}"'):
                    chunks.append(bytes(value or b""))
    return b"\n".join(chunks)


def test_no_plaintext_content_in_the_database(durable_url):
    key = AESCipher.create_key(32)
    settings = Settings(encryption_key=SecretStr(key), compress=True, snapshot_interval=16)
    with ContextStore.from_url(durable_url, settings) as store:
        secrets_everywhere(store)
        # The HTTP service stores idempotent responses: a prompt holds contents too.
        from fastapi.testclient import TestClient

        from ctxstore.adapters.http import create_app

        cid = store.contexts()[0].context_id
        with TestClient(create_app(store, ServiceConfig())) as client:
            r = client.post(f"/v1/contexts/{cid}/prompt", json={"budget": 8000},
                            headers={"Idempotency-Key": "k"})  # fmt: skip
            assert MARKER in r.text
        assert store.verify().ok
        lines = list(store.export_events(cid))
        assert MARKER in "".join(lines)  # exports are plain JSON, by design
    data = raw_bytes(durable_url, store)
    assert len(data) > 10_000
    for secret in (MARKER, CHINESE, "question 7"):
        assert secret.encode() not in data, secret
        assert secret.encode().hex().encode() not in data, secret
    # The same key reads it all back; no key, or another one, is refused at once.
    with ContextStore.from_url(durable_url, settings) as store:
        assert MARKER in store.visible(cid).messages[-1].text()
        assert store.verify().ok
    for wrong in (Settings(), Settings(encryption_key=SecretStr(AESCipher.create_key(32)))):
        with pytest.raises(StoreUnavailableError, match="CTXSTORE_ENCRYPTION_KEY"):
            ContextStore.from_url(durable_url, wrong)


def test_without_encryption_the_content_is_there(tmp_path):
    """The check above can fail: the same scan finds the marker in a plain store."""
    url = f"sqlite:///{tmp_path / 'plain.db'}"
    with ContextStore.from_url(url) as store:
        secrets_everywhere(store)
    assert MARKER.encode() in raw_bytes(url, store)


def test_a_bad_key_is_refused_with_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="base64 of 16, 24 or 32 bytes"):
        ContextStore.from_url(
            f"sqlite:///{tmp_path / 'x.db'}", Settings(encryption_key=SecretStr("short"))
        )


def test_compression_alone_shrinks_what_is_stored(tmp_path):
    sizes = {}
    for compress in (False, True):
        url = f"sqlite:///{tmp_path / f'c{compress}.db'}"
        with ContextStore.from_url(url, Settings(compress=compress)) as store:
            cid = store.create()
            store.insert(cid, [{"role": "user", "content": "the same words again " * 200}] * 20)
            raw = b"".join(e.state for e in store._storage.recorder.select_events(cid))
            sizes[compress] = len(raw)
            assert store.verify().ok
    assert sizes[True] * 5 < sizes[False]
