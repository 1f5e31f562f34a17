"""Attachments: upload the bytes once, refer to them from messages, download them back.

`POST /v1/blobs` takes the raw bytes (Content-Type: their media type), read as a stream and
refused with 413 past CTXSTORE_MAX_BLOB_BYTES; it answers the blob's reference, which a
message puts where its data would be. `GET /v1/blobs/{sha256}` gives the bytes back. Both
are the caller's tenant's only: another tenant's blob is not found.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Annotated, Literal

from fastapi import APIRouter, Path, Request, Response
from pydantic import BaseModel, Field

from ctxstore.adapters.http.deps import API, Svc, Who
from ctxstore.domain.blobs import SIZE_HEADER, BlobRef
from ctxstore.domain.errors import BlobTooLargeError

router = APIRouter(prefix=f"{API}/blobs", tags=["attachments"])
Sha = Annotated[str, Path(pattern="^[0-9a-f]{64}$", description="the bytes' sha256, in hex")]


class BlobInfo(BaseModel):
    sha256: str
    media_type: str
    bytes: int
    width: int | None
    height: int | None
    ref: str  # what a message holds in place of the data


def info(ref: BlobRef) -> BlobInfo:
    return BlobInfo(
        sha256=ref.sha256, media_type=ref.media_type, bytes=ref.size, width=ref.width,
        height=ref.height, ref=ref.uri(),
    )  # fmt: skip


UPLOAD_BODY = {
    "requestBody": {
        "required": True,
        "description": "the attachment's bytes; Content-Type: their media type",
        "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
                    "image/*": {"schema": {"type": "string", "format": "binary"}}},
    }
}  # fmt: skip


@router.post("", status_code=201, response_model=BlobInfo, openapi_extra=UPLOAD_BODY)
async def upload(request: Request, who: Who, svc: Svc) -> BlobInfo:
    """Store the request's bytes once (by their sha256) for messages to refer to."""
    limit = svc.store.settings.max_blob_bytes
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise BlobTooLargeError(f"the upload is over the limit of {limit} bytes")
    media_type = request.headers.get("content-type", "application/octet-stream")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise BlobTooLargeError(f"the upload is over the limit of {limit} bytes")
    put = functools.partial(
        svc.store.put_blob, bytes(body), media_type.split(";")[0].strip(), tenant=who.tenant
    )
    return info(await asyncio.get_running_loop().run_in_executor(svc.pool, put))


@router.get(
    "/{sha256}", response_class=Response,
    responses={200: {"content": {"application/octet-stream": {}}, "description": "the bytes"}},
)  # fmt: skip
async def download(sha256: Sha, who: Who, svc: Svc) -> Response:
    """The bytes of a blob the caller's tenant holds."""
    get = functools.partial(svc.store.blob, sha256, tenant=who.tenant)
    found = await asyncio.get_running_loop().run_in_executor(svc.pool, get)
    headers = {"ETag": f'"{sha256}"', "Cache-Control": "private, max-age=31536000, immutable"}
    if found.ref.width is not None and found.ref.height is not None:  # an image's, as stored
        headers[SIZE_HEADER] = f"{found.ref.width}x{found.ref.height}"
    return Response(found.data, media_type=found.ref.media_type, headers=headers)


class FileIdBody(BaseModel):
    provider: Literal["openai", "anthropic"]
    file_id: str = Field(min_length=1, max_length=200)


@router.post("/{sha256}/file-ids", status_code=204, response_class=Response)
async def record_file_id(sha256: Sha, body: FileIdBody, who: Who, svc: Svc) -> Response:
    """Note the id a provider's Files API gave this blob: readers asking for that
    provider's files (`GET /v1/contexts/{id}?files=openai`) get it in the blob's place."""
    note = functools.partial(
        svc.store.record_file_id, sha256, body.provider, body.file_id, tenant=who.tenant
    )
    await asyncio.get_running_loop().run_in_executor(svc.pool, note)
    return Response(status_code=204)
