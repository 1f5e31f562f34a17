"""`ctxstore encrypt`: a store written without encryption sealed in place, killed half-way
(SIGKILL) and run again; and re-keying one context (`store.admin.rekey`)."""

from __future__ import annotations

import base64
import hashlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from uuid import UUID

import psycopg
import pytest
from eventsourcing.cryptography import AESCipher
from pydantic import SecretStr

from ctxstore.adapters.keys.cipher import MAGIC
from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore

from .test_at_rest import raw_bytes
from .test_attachments import png

MARK = "PLAIN-5e7a"
CLI = str(Path(sys.executable).parent / "ctxstore")


def _states(store: ContextStore) -> list[bytes]:
    storage = store._core.storage
    found = [bytes(n.state) for n in storage.recorder.select_notifications(1, 10**6)]
    for cid in store._core.storage.audit_index.indexed_heads():
        found += [bytes(s.state) for s in storage.snapshots.recorder.select_events(UUID(cid))]
    return found


def _sealed_events(url: str) -> int:
    """Events sealed per context so far, counted in the database (cheap enough to poll)."""
    if url.startswith("sqlite"):
        with sqlite3.connect(url.removeprefix("sqlite:///"), timeout=5) as db:
            found = db.execute(
                "SELECT count(*) FROM stored_events WHERE substr(state, 1, 3) = ?", (MAGIC,)
            ).fetchone()
        return int(found[0])
    dsn, _, schema = url.partition("?schema=")
    with psycopg.connect(dsn) as conn:
        found = conn.execute(
            f'SELECT count(*) FROM "{schema}".ctxstore_events '
            "WHERE substring(state from 1 for 3) = %s",
            (MAGIC,),
        ).fetchone()
    return int(found[0]) if found else 0


@pytest.mark.slow  # a process killed mid-run
def test_encrypt_in_place_survives_a_kill_and_completes(durable_url):
    plain = Settings(snapshot_interval=4)
    with ContextStore.from_url(durable_url, plain) as store:
        cids = [store.create(name=f"c{i}") for i in range(120)]
        image = png(30, 30)
        url = "data:image/png;base64," + base64.b64encode(image).decode()
        store.insert(cids[1], [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": url}}]}])  # fmt: skip
        uploaded = store.put_blob(png(31, 30), "image/png")
        for n in range(5):
            for c in cids:
                store.insert(c, [{"role": "user", "content": f"{MARK} {n}"}])
        before = {c: store.visible(c).model_dump() for c in cids[:5]}
    key = AESCipher.create_key(32)
    env = {**os.environ, "CTXSTORE_ENCRYPTION_KEY": key, "CTXSTORE_URL": durable_url}
    proc = subprocess.Popen([CLI, "encrypt", "--batch", "1"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    keyed = Settings(encryption_key=SecretStr(key), snapshot_interval=4)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # kill it once it has sealed some, not all
            time.sleep(0.005)
            if _sealed_events(durable_url) > 5:
                break
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
    with ContextStore.from_url(durable_url, keyed) as store:  # half sealed: all readable
        states = _states(store)
        assert 0 < sum(s.startswith(MAGIC) for s in states) < len(states)
        assert {c: store.visible(c).model_dump() for c in cids[:5]} == before
        assert store.verify().ok
    done = subprocess.run([CLI, "--url", durable_url, "encrypt", "--json"], env=env, check=False,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    with ContextStore.from_url(durable_url, keyed) as store:
        assert all(s.startswith(MAGIC) for s in _states(store))
        assert {c: store.visible(c).model_dump() for c in cids[:5]} == before
        assert store.verify().ok
        store.insert(cids[0], [{"role": "user", "content": "after"}])
        assert store.blob(hashlib.sha256(image).hexdigest()).data == image
        assert store.blob(uploaded.sha256).ref.size == uploaded.size
    data = raw_bytes(durable_url, store)
    assert MARK.encode() not in data
    assert image[-300:] not in data  # the attachment is under a key of its own now


def test_rekeying_a_context_seals_it_anew_and_drops_the_old_key(durable_url):
    settings = Settings(encryption_key=SecretStr(AESCipher.create_key(32)), snapshot_interval=4)
    with ContextStore.from_url(durable_url, settings) as store:
        cid = store.create(name="r")
        other = store.create(name="o")
        for n in range(9):
            store.insert(cid, [{"role": "user", "content": f"{MARK} {n}"}])
            store.insert(other, [{"role": "user", "content": "o"}])
        image = png(20, 20)
        url = "data:image/png;base64," + base64.b64encode(image).decode()
        store.insert(cid, [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": url}}]}])  # fmt: skip
        before = store.visible(cid).model_dump()
        keys = store._core.storage.keys.keys
        old = keys.generations(cid.hex)
        assert list(old) == [1]
        done = store.admin.rekey(cid, wait=0)
        assert done.events == 11 and done.snapshots >= 2
        assert list(keys.generations(cid.hex)) == [2]
        rows = store._core.storage.recorder.select_events(cid)
        assert all(bytes(r.state).startswith(MAGIC + (2).to_bytes(4, "big")) for r in rows)
        assert store.visible(cid).model_dump() == before
        assert store.verify().ok
        assert store.blob(hashlib.sha256(image).hexdigest()).data == image  # its key re-sealed
        with pytest.raises(Exception, match="no context"):
            store.admin.rekey("00000000000000000000000000000000", wait=0)
    with ContextStore.from_url(durable_url, settings) as store:  # cold
        assert store.visible(cid).model_dump() == before
        assert store.visible(other).messages[0].text() == "o"
