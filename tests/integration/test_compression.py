"""Stored states are compressed where it pays, and every store reads every form."""

from __future__ import annotations

import os
import zlib

import psycopg
import pytest
from eventsourcing.compressor import ZlibCompressor
from pydantic import ValidationError

from ctxstore.adapters.settings import Settings
from ctxstore.adapters.storage.codec.compression import (
    MIN_BYTES,
    ZSTD_MAGIC,
    AdaptiveCompressor,
    compressor,
)
from ctxstore.adapters.storage.postgres_schema import reloptions_statement
from ctxstore.adapters.store.facade import ContextStore

LONG = "the parcel is late, the customer asks for a refund; 包裹延迟三天需要退款 " * 40


def test_compressor_keeps_small_and_incompressible_states_plain():
    c = AdaptiveCompressor()
    small = b'{"a":"' + b"x" * (MIN_BYTES - 20) + b'"}'
    assert c.compress(small) == small
    big = ('{"t":"' + LONG + '"}').encode()
    packed = c.compress(big)
    assert packed[:4] == ZSTD_MAGIC and len(packed) * 5 < len(big)
    assert c.decompress(packed) == big
    assert c.decompress(c.compress(small)) == small
    random_bytes = b"{" + os.urandom(3000)
    assert c.compress(random_bytes) == random_bytes  # would grow: kept as it is
    with pytest.raises(ValueError, match="neither JSON, zstd nor zlib"):
        c.decompress(b"\x00garbage")
    # zlib streams (what earlier releases wrote) read as they are.
    assert c.decompress(zlib.compress(big, 6)) == big
    with pytest.raises(ValueError, match="does not decompress"):
        c.decompress(packed[:-8])  # a truncated zstd frame
    with pytest.raises(ValueError, match="does not decompress"):
        c.decompress(zlib.compress(big)[:-8])


def test_setting_modes_and_the_old_flag(monkeypatch):
    monkeypatch.delenv("CTXSTORE_COMPRESS", raising=False)
    assert Settings().compress == "auto"
    monkeypatch.setenv("CTXSTORE_COMPRESS", "true")  # as the README used to say
    assert Settings().compress == "always"
    monkeypatch.setenv("CTXSTORE_COMPRESS", "off")
    assert Settings().compress == "off"
    monkeypatch.delenv("CTXSTORE_COMPRESS")
    assert Settings(compress=True).compress == "always"
    assert Settings(compress=False).compress == "off"
    assert Settings(compress="TRUE").compress == "always"
    assert Settings(compress="0").compress == "off"
    with pytest.raises(ValidationError, match="compress"):
        Settings(compress="lz4")
    assert compressor("always").compress(b'{"a":"' + b"a" * 100 + b'"}')[:4] == ZSTD_MAGIC
    assert compressor("off").compress(LONG.encode()) == LONG.encode()


def _write(store: ContextStore) -> tuple[object, list[str]]:
    cid = store.create(name="compressed")
    texts = []
    for i in range(12):  # past the snapshot interval
        texts.append(f"{i} {LONG}")
        store.insert(cid, [{"role": "user", "content": texts[-1]}])
        store.insert(cid, [{"role": "assistant", "content": f"short answer {i}"}])
    return cid, texts


@pytest.mark.parametrize("mode", ["auto", "always", "off"])
def test_which_states_each_mode_compresses(durable_url, mode):
    with ContextStore.from_url(durable_url, Settings(compress=mode, snapshot_interval=8)) as s:
        cid, texts = _write(s)
        states = [e.state for e in s._storage.recorder.select_events(cid)]
        snaps = [e.state for e in s._storage.snapshots.recorder.select_events(cid)]
        assert snaps
        packed = [st for st in states + snaps if st[:4] == ZSTD_MAGIC]
        plain = [st for st in states + snaps if st[:1] == b"{"]
        assert len(packed) + len(plain) == len(states) + len(snaps)
        if mode == "off":
            assert not packed
        elif mode == "always":
            assert not plain
        else:  # the turns' long messages and the snapshots shrink; short answers stay plain
            assert len(packed) == 12 + len(snaps)
            assert all(len(st) < MIN_BYTES for st in plain)
            assert LONG.encode() not in b"".join(packed)
        assert [m.text() for m in s.visible(cid).messages[::2]] == texts
        assert s.verify().ok


def test_every_setting_reads_every_other_settings_store(durable_url):
    written = {}
    for mode in ("off", "always", "auto"):
        with ContextStore.from_url(durable_url, Settings(compress=mode, snapshot_interval=8)) as s:
            written[mode] = _write(s)
    for mode in ("off", "always", "auto"):
        with ContextStore.from_url(durable_url, Settings(compress=mode)) as s:
            for cid, texts in written.values():
                s._core.cache.drop(cid)  # from storage: snapshot and events
                assert [m.text() for m in s.visible(cid).messages[::2]] == texts
                assert [m.text() for m in s.visible(cid, at_version=5).messages[::2]] == texts[:2]
            assert s.verify().ok
            assert s.audit(limit=1000).entries


def test_stores_written_by_the_librarys_zlib_compressor_still_read(tmp_path):
    """Before the adaptive compressor, CTXSTORE_COMPRESS=true set the library's own."""
    url = f"sqlite:///{tmp_path / 'old.db'}"
    with ContextStore.from_url(url, Settings(snapshot_interval=8)) as s:
        s._storage.mapper.compressor = ZlibCompressor()
        cid, texts = _write(s)
        assert all(e.state[:1] == b"\x78" for e in s._storage.recorder.select_events(cid))
    with ContextStore.from_url(url) as s:
        assert [m.text() for m in s.visible(cid).messages[::2]] == texts
        assert s.verify().ok
        s.insert(cid, [{"role": "user", "content": LONG}])  # goes on, adaptively
        assert s.verify().ok


@pytest.mark.parametrize(
    "durable_url", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
def test_postgres_keeps_states_up_to_a_page_in_the_row(durable_url):
    """Compressed states of 2-8 KB stay in the events table's rows, not in TOAST chunks."""
    schema = durable_url.split("schema=", 1)[1]
    sizes = []
    for _ in range(2):  # opening again leaves the setting as it is
        with ContextStore.from_url(durable_url) as s:
            cid = s.create()
            text = " ".join(f"{i}:{os.urandom(4).hex()}" for i in range(500))  # ~6 KB
            s.insert(cid, [{"role": "user", "content": text}])
            sizes += [len(e.state) for e in s._storage.recorder.select_events(cid)][1:]
    assert all(2_100 < n < 8_000 for n in sizes)  # past PostgreSQL's 2 KB TOAST threshold
    with psycopg.connect(durable_url.split("?", 1)[0]) as conn:
        options, toasted = conn.execute(
            "SELECT c.reloptions, pg_relation_size(c.reltoastrelid) FROM pg_class c "
            "WHERE c.oid = %s::regclass",
            (f'"{schema}".ctxstore_events',),
        ).fetchone()
        # A parameter that cannot be set is a warning, never a store that will not open:
        # the statement goes through, and the table keeps what it had.
        conn.execute(reloptions_statement(schema, "ctxstore_events", {"toast_tuple_target": "1"}))
        after = conn.execute(
            "SELECT reloptions FROM pg_class WHERE oid = %s::regclass",
            (f'"{schema}".ctxstore_events',),
        ).fetchone()[0]
        snapshot_options = conn.execute(
            "SELECT reloptions FROM pg_class WHERE oid = %s::regclass",
            (f'"{schema}".ctxstore_snapshots',),
        ).fetchone()[0]
    assert "toast_tuple_target=8160" in options
    assert after == options
    assert toasted == 0
    # Superseded snapshots are deleted: their table is vacuumed as PostgreSQL's defaults
    # would, not after the library's 100 million deleted rows.
    assert {"autovacuum_vacuum_threshold=50", "autovacuum_vacuum_scale_factor=0.2"} <= set(
        snapshot_options
    )
