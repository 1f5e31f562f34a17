"""Attachments over HTTP: uploads streamed under their limit, downloads, references in
messages, inline reads through the client; each tenant sees only its own blobs."""

from __future__ import annotations

import base64

import httpx
import pytest

from ctxstore.domain.errors import BlobNotFoundError, BlobTooLargeError, InvalidMessageError

from ..integration.test_attachments import IMAGE, png
from .conftest import Service


def test_upload_refer_and_download(service: Service) -> None:
    acme, globex = service.client(), service.client("token-globex")
    ref = acme.put_blob(IMAGE, "image/png")
    assert (ref.size, ref.width, ref.height) == (len(IMAGE), 320, 240)
    assert acme.put_blob(IMAGE, "image/png") == ref  # the same bytes: the same blob
    assert acme.blob(ref.sha256).data == IMAGE
    assert acme.blob(ref.sha256).ref == ref  # what the store in process answers
    with pytest.raises(BlobNotFoundError):
        globex.blob(ref.sha256)  # another tenant's: not found
    cid = acme.create()
    message = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": ref.uri()}}]}
    acme.insert(cid, [message])
    seen = acme.visible(cid, inline=True).messages[0].to_openai()
    assert seen["content"][0]["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(
        IMAGE
    ).decode("ascii")
    assert acme.visible(cid).messages[0].to_openai() == message
    theirs = globex.create()
    with pytest.raises(InvalidMessageError):
        globex.insert(theirs, [message])  # a reference to a blob globex does not hold


def test_an_inline_image_in_a_message_is_stored_once(service: Service) -> None:
    acme = service.client()
    cid = acme.create()
    small = png(40, 30)  # under the service's 64 KiB body limit as JSON
    url = "data:image/png;base64," + base64.b64encode(small).decode()
    message = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}
    for _ in range(3):
        acme.insert(cid, [message])
    assert service.store._storage.blobs.stored_bytes() == len(small)
    assert acme.visible(cid, inline=True).to_openai() == [message] * 3


def test_an_upload_over_the_limit_is_refused_413(durable_url: str) -> None:
    from ctxstore.adapters.settings import ServiceConfig, Settings
    from ctxstore.adapters.store.facade import ContextStore

    from .conftest import serve

    config = ServiceConfig(tokens={"t": "acme"}, max_body_bytes=64 * 1024)
    with ContextStore.from_url(durable_url, Settings(max_blob_bytes=100_000)) as store:
        for url in serve(store, config):
            # bigger than the JSON body limit, within the blob limit: uploads have their own
            body = IMAGE[:90_000]
            ok = httpx.post(f"{url}/v1/blobs", content=body,
                            headers={"Authorization": "Bearer t", "Content-Type": "image/png"})  # fmt: skip
            assert ok.status_code == 201 and ok.json()["bytes"] == 90_000

            def chunks():  # streamed, no length declared
                for _ in range(30):
                    yield b"x" * 10_000

            big = httpx.post(f"{url}/v1/blobs", content=chunks(),
                             headers={"Authorization": "Bearer t"})  # fmt: skip
            assert big.status_code == 413 and big.json()["error"] == "BlobTooLargeError"
            declared = httpx.post(f"{url}/v1/blobs", content=b"x" * 200_000,
                                  headers={"Authorization": "Bearer t"})  # fmt: skip
            assert declared.status_code == 413
            anonymous = httpx.post(f"{url}/v1/blobs", content=b"x")
            assert anonymous.status_code == 401
            with pytest.raises(BlobTooLargeError):
                from ctxstore.adapters.http.client import CtxStoreClient

                CtxStoreClient(url, token="t").put_blob(b"y" * 200_000, "application/pdf")
            assert store._storage.blobs.stored_bytes() == 90_000


def test_a_file_id_recorded_over_http(service: Service) -> None:
    acme, globex = service.client(), service.client("token-globex")
    ref = acme.put_blob(IMAGE, "image/png")
    cid = acme.create()
    item = {"type": "message", "role": "user", "content": [
        {"type": "input_image", "image_url": ref.uri(), "detail": "low"}]}  # fmt: skip
    acme.insert(cid, [item], format="openai-responses")
    acme.record_file_id(ref.sha256, "openai", "file-abc")
    with pytest.raises(BlobNotFoundError):
        globex.record_file_id(ref.sha256, "openai", "file-theirs")  # not globex's blob
    seen = acme.visible(cid, files="openai").to_responses()
    assert seen[0]["content"][0] == {"type": "input_image", "detail": "low", "file_id": "file-abc"}


def test_curls_default_form_type_is_sniffed_or_refused(service: Service) -> None:
    """`curl -d @image.png` declares application/x-www-form-urlencoded: a PNG is stored as
    a PNG; bytes of no known type are refused with a problem naming the header."""
    headers = {"Authorization": "Bearer token-acme"}
    form = {**headers, "Content-Type": "application/x-www-form-urlencoded"}
    done = httpx.post(f"{service.url}/v1/blobs", content=IMAGE, headers=form)
    assert done.status_code == 201 and done.json()["media_type"] == "image/png", done.text
    refused = httpx.post(f"{service.url}/v1/blobs", content=b"a=1&b=2", headers=form)
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"] == "InvalidMessageError"
    assert "Content-Type" in refused.json()["detail"]
    lying = {**headers, "Content-Type": "image/jpeg"}
    assert httpx.post(f"{service.url}/v1/blobs", content=IMAGE, headers=lying).status_code == 422
