"""Attachments by reference: stored once per tenant by their sha256, read back exactly, priced
from their stored dimensions, encrypted at rest, exported and imported, erased with the
last context that refers to them; on every backend."""

from __future__ import annotations

import base64
import hashlib
import os
import struct
import zlib
from pathlib import Path

import pytest
from eventsourcing.cryptography import AESCipher
from pydantic import SecretStr

from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.domain.blobs import is_ref, parse_ref
from ctxstore.domain.errors import (
    BlobNotFoundError,
    BlobTooLargeError,
    InvalidImportError,
    InvalidMessageError,
    InvalidOperationError,
)
from ctxstore.domain.message_input import parse_message
from ctxstore.domain.tokens import message_cost

from .test_at_rest import raw_bytes
from .test_erasure import held_bytes


def png(width: int, height: int) -> bytes:
    """A real PNG of random pixels (so it does not compress away)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    rows = b"".join(b"\x00" + os.urandom(width * 3) for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows))
            + chunk(b"IEND", b""))  # fmt: skip


IMAGE = png(320, 240)
B64 = base64.b64encode(IMAGE).decode()
AUDIO = os.urandom(4000)


def shapes() -> list[tuple[str | None, dict]]:
    """One message of each native shape holding an attachment where that shape puts one."""
    return [
        (None, {"role": "user", "content": [
            {"type": "text", "text": "What is in this picture?"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{B64}",
                                                "detail": "high"}}]}),
        (None, {"role": "user", "content": [{"type": "input_audio", "input_audio": {
            "data": base64.b64encode(AUDIO).decode(), "format": "wav"}}]}),
        ("openai-responses", {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "Describe it"},
            {"type": "input_image", "image_url": f"data:image/png;base64,{B64}", "detail": "auto"},
            {"type": "input_file", "filename": "notes.pdf",
             "file_data": "data:application/pdf;base64," + base64.b64encode(AUDIO).decode()}]}),
        ("anthropic", {"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": B64}},
            {"type": "text", "text": "And this one?"}]}),
    ]  # fmt: skip


def given(m) -> dict:
    return m.as_given()


def test_each_shape_reads_back_exactly_and_stores_each_attachment_once(store):
    cid = store.create()
    for fmt, message in shapes():
        for _ in range(3):  # the same attachments again: stored once
            store.insert(cid, message, format=fmt)
    seen = store.visible(cid)
    as_refs = [given(m) for m in seen.messages]
    assert all("base64," not in str(m) and B64[:100] not in str(m) for m in as_refs)
    assert [given(m) for m in store.visible(cid, inline=True).messages] == [
        m for _, m in shapes() for _ in range(3)
    ]
    assert store.build_prompt(cid, 10**6).messages == store.visible(cid, inline=True).messages
    assert store._storage.blobs.stored_bytes() == len(IMAGE) + len(AUDIO)  # image, audio/pdf
    ref = parse_ref(as_refs[0]["content"][1]["image_url"]["url"])
    assert (ref.media_type, ref.size, ref.width, ref.height) == ("image/png", len(IMAGE), 320, 240)
    assert store.blob(ref.sha256).data == IMAGE


def test_an_image_costs_the_same_by_reference_as_inline(store):
    cid = store.create()
    counter = store._core.counter(store._core.fresh(cid))
    for fmt, message in shapes()[::3]:  # the images: chat and Anthropic
        written = store.insert(cid, message, format=fmt)
        inline = parse_message(message, fmt or "openai-chat").stored()
        cost, estimated = message_cost(inline, counter)
        assert store.visible(cid).token_counts[written.ids[0]] == cost
        assert not estimated or fmt == "anthropic"  # (Anthropic counts are estimates)


def test_small_and_non_canonical_payloads_stay_inline(store):
    cid = store.create()
    tiny = {"role": "user", "content": [{"type": "image_url", "image_url": {
        "url": "data:image/png;base64," + base64.b64encode(b"x" * 100).decode()}}]}  # fmt: skip
    wrapped = base64.encodebytes(IMAGE).decode()  # line breaks: not the canonical form
    odd = {"role": "user", "content": [{"type": "image", "source": {
        "type": "base64", "media_type": "image/png", "data": wrapped}}]}  # fmt: skip
    store.insert(cid, tiny)
    store.insert(cid, odd, format="anthropic")
    assert [given(m) for m in store.visible(cid).messages] == [tiny, odd]
    assert store._storage.blobs.stored_bytes() == 0


def test_a_reference_to_an_uploaded_blob(store):
    ref = store.put_blob(IMAGE, "image/png")
    assert store.put_blob(IMAGE, "image/png") == ref  # once
    cid = store.create()
    message = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": ref.uri()}}]}
    store.insert(cid, message)
    inlined = given(store.visible(cid, inline=True).messages[0])
    assert inlined["content"][0]["image_url"]["url"] == f"data:image/png;base64,{B64}"
    unknown = ref.uri().replace(ref.sha256, "0" * 64)
    with pytest.raises(InvalidMessageError, match="does not hold"):
        store.insert(cid, {"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": unknown}}]})  # fmt: skip
    with pytest.raises(InvalidMessageError, match="malformed blob reference"):
        store.insert(cid, {"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "ctxstore-blob:sha256:xyz"}}]})  # fmt: skip
    assert store.visible(cid).version == 2  # nothing written by the refused ones
    with pytest.raises(BlobNotFoundError):
        store.blob("0" * 64)


def test_an_upload_is_what_its_bytes_are(store):
    """A declared media type is checked against the bytes; an undeclared one is sniffed;
    an image whose size cannot be read is refused; nothing is stored by a refusal."""
    jpeg = b"\xff\xd8\xff\xe0" + bytes(200)
    with pytest.raises(
        InvalidMessageError, match="declared image/png, but its bytes are image/jpeg"
    ):
        store.put_blob(jpeg, "image/png")
    with pytest.raises(InvalidMessageError, match="size cannot be read"):
        store.put_blob(jpeg, "image/jpeg")  # a JPEG header without its frame
    with pytest.raises(InvalidMessageError, match="declared audio/wav"):
        store.put_blob(IMAGE, "audio/wav")
    with pytest.raises(InvalidMessageError, match="declared text/plain, but its bytes are"):
        store.put_blob(IMAGE, "text/plain")
    with pytest.raises(InvalidMessageError, match="Content-Type"):
        store.put_blob(b"name=value&x=1", "application/x-www-form-urlencoded")
    with pytest.raises(BlobNotFoundError):
        store.blob(hashlib.sha256(jpeg).hexdigest())
    sniffed = store.put_blob(IMAGE, "application/x-www-form-urlencoded")
    assert (sniffed.media_type, sniffed.width, sniffed.height) == ("image/png", 320, 240)
    assert store.put_blob(IMAGE, "image/PNG").media_type == "image/png"
    assert store.put_blob(b"%PDF-1.7\n...", "application/octet-stream").media_type == (
        "application/pdf"
    )
    assert store.put_blob(AUDIO, "application/octet-stream").media_type == (
        "application/octet-stream"
    )
    assert store.put_blob(b"plain words", "text/plain").media_type == "text/plain"


def test_a_tenant_never_reaches_another_tenants_blob(durable_url):
    with ContextStore.from_url(durable_url) as store:
        ref = store.put_blob(IMAGE, "image/png", tenant="acme")
        theirs = store.create(tenant="globex")
        with pytest.raises(InvalidMessageError, match="does not hold"):
            store.insert(theirs, {"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": ref.uri()}}]})  # fmt: skip
        with pytest.raises(BlobNotFoundError):
            store.blob(ref.sha256, tenant="globex")
        assert store.blob(ref.sha256, tenant="acme").data == IMAGE


def test_the_size_limit_refuses_and_writes_nothing(durable_url):
    with ContextStore.from_url(durable_url, Settings(max_blob_bytes=64 * 1024)) as store:
        cid = store.create()
        with pytest.raises(BlobTooLargeError, match="CTXSTORE_MAX_BLOB_BYTES"):
            store.insert(cid, shapes()[0][1])
        with pytest.raises(BlobTooLargeError):
            store.put_blob(IMAGE, "image/png")
        assert store.visible(cid).version == 1 and store._storage.blobs.stored_bytes() == 0


def test_erasure_removes_a_blob_with_the_last_context_that_refers_to_it(store_url):
    with ContextStore.from_url(store_url) as store:
        one, two = store.create(), store.create()
        store.insert(one, shapes()[0][1])
        store.insert(two, shapes()[3][1], format="anthropic")  # the same image
        fork = store.fork(two)
        store.erase(one, reason="asked")
        store.erase(two, reason="asked", with_forks=False)
        assert store.visible(fork, inline=True).messages[0].as_given() == shapes()[3][1]
        store.erase(fork, reason="asked")
        assert store._storage.blobs.stored_bytes() == 0
        chunk = IMAGE[1000:1064]
        assert chunk not in held_bytes(store_url, store)


def test_export_and_import_carry_the_blobs(durable_url, tmp_path: Path):
    with ContextStore.from_url(durable_url) as store:
        cid = store.create()
        store.insert(cid, shapes()[2][1], format="openai-responses")
        lines = list(store.export_events(cid))
        assert sum('"blob"' in line[:10] for line in lines) == 2  # the image and the pdf
        store.erase(cid, reason="moved")
        assert store._storage.blobs.stored_bytes() == 0
        back = store.import_events(lines)
        assert store.visible(back, inline=True).messages[0].as_given() == shapes()[2][1]
        assert store.verify(back).ok
        other = str(base64.b64encode(AUDIO[::-1]).decode())
        altered = [line.replace(base64.b64encode(AUDIO).decode(), other) for line in lines]
        with pytest.raises(InvalidImportError, match="does not match its sha256"):
            store.import_events(altered, new_id=True)


def test_blobs_are_encrypted_at_rest(durable_url):
    key = AESCipher.create_key(32)
    with ContextStore.from_url(durable_url, Settings(encryption_key=SecretStr(key))) as store:
        cid = store.create()
        store.insert(cid, shapes()[0][1])
        assert IMAGE[2000:2048] not in raw_bytes(durable_url, store)
        assert store.visible(cid, inline=True).messages[0].as_given() == shapes()[0][1]


def test_references_are_visible_as_such(store):
    cid = store.create()
    store.insert(cid, shapes()[3][1], format="anthropic")
    data = given(store.visible(cid).messages[0])["content"][0]["source"]["data"]
    assert is_ref(data) and parse_ref(data).form == "base64"


def test_verify_checks_each_attachment_against_its_hash(tmp_path: Path):
    import sqlite3

    url = f"sqlite:///{tmp_path / 'v.db'}"
    with ContextStore.from_url(url) as store:
        cid = store.create()
        store.insert(cid, shapes()[0][1])
        assert store.verify(cid).ok and store.verify().ok
        with sqlite3.connect(tmp_path / "v.db") as db:
            db.execute("UPDATE ctxstore_blobs SET data = ?", (IMAGE[::-1],))
        found = store.verify(cid)
        assert not found.ok and "does not match its sha256" in found.broken[0].reason
        assert found.broken[0].version == 2  # the insert that refers to it
        with sqlite3.connect(tmp_path / "v.db") as db:
            db.execute("DELETE FROM ctxstore_blobs")
        assert "is missing" in store.verify().broken[0].reason


def test_a_providers_file_id_stands_for_the_attachment(store):
    cid = store.create()
    for fmt, message in shapes():
        store.insert(cid, message, format=fmt)
    image = parse_ref(given(store.visible(cid).messages[0])["content"][1]["image_url"]["url"])
    pdf = parse_ref(given(store.visible(cid).messages[2])["content"][2]["file_data"])
    store.record_file_id(image.sha256, "openai", "file-img")
    store.record_file_id(image.sha256, "anthropic", "file_011img")
    store.record_file_id(pdf.sha256, "openai", "file-pdf")
    openai = [given(m) for m in store.visible(cid, files="openai", inline=True).messages]
    assert openai[0] == shapes()[0][1]  # a chat image_url has no file form: its data
    assert openai[2]["content"][1] == {
        "type": "input_image",
        "detail": "auto",
        "file_id": "file-img",
    }
    assert openai[2]["content"][2] == {"type": "input_file", "file_id": "file-pdf"}
    assert openai[3] == shapes()[3][1]  # Anthropic's source takes Anthropic's ids only
    anthropic = [given(m) for m in store.visible(cid, files="anthropic").messages]
    assert anthropic[3]["content"][0]["source"] == {"type": "file", "file_id": "file_011img"}
    assert is_ref(anthropic[2]["content"][1]["image_url"])  # no id: still a reference
    with pytest.raises(BlobNotFoundError):
        store.record_file_id("0" * 64, "openai", "file-x")
    with pytest.raises(InvalidOperationError):
        store.record_file_id(image.sha256, "gemini", "x")


def test_text_that_looks_like_a_payload_or_a_reference_is_text(store):
    cid = store.create()
    pasted = "data:image/png;base64," + B64
    messages = [
        {"role": "user", "content": pasted},
        {"role": "user", "content": [{"type": "text", "text": pasted}]},
        {"role": "user", "content": "ctxstore-blob:sha256:not-a-reference"},
        {"role": "user", "content": [{"type": "text", "text": "ctxstore-blob:sha256:" + "0" * 64}]},
    ]
    store.insert(cid, messages)
    assert [given(m) for m in store.visible(cid).messages] == messages
    assert store._storage.blobs.stored_bytes() == 0


def test_a_reference_written_by_a_caller_says_what_the_store_holds(store):
    ref = store.put_blob(IMAGE, "image/png")
    forged = ref.uri().replace("width=320&height=240", "width=99999&height=99999")
    forged = forged.replace("type=image/png", "type=image/gif").replace("as=data-url", "as=base64")
    cid = store.create()
    message = {"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": forged}}]}  # fmt: skip
    store.insert(cid, message, format="anthropic")
    kept = parse_ref(given(store.visible(cid).messages[0])["content"][0]["source"]["data"])
    assert (kept.media_type, kept.size, kept.width, kept.height, kept.form) == (
        "image/png", len(IMAGE), 320, 240, "base64")  # fmt: skip
    assert (
        store.visible(cid, inline=True).messages[0].as_given()["content"][0]["source"]["data"]
        == B64
    )
