"""Attachments by reference, for the store: lift payloads out of messages being written,
keep them once per tenant, and put them back for readers that want the data inline.

What a reference looks like and when a payload is lifted is domain/blobs.py's; where the
bytes live, storage/blobs.py's. A message can also refer to a blob uploaded first (the
HTTP service's POST /v1/blobs, or `put_blob`): writing it checks that the tenant has it.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from ctxstore.adapters.store.core import StoreCore
from ctxstore.domain.blobs import (
    Blob,
    BlobRef,
    StoredBlob,
    describe,
    has_references,
    holds_attachments,
    inline,
    lift,
    references,
    restate,
)
from ctxstore.domain.errors import (
    BlobNotFoundError,
    BlobTooLargeError,
    InvalidMessageError,
    InvalidOperationError,
)
from ctxstore.domain.limits import check_text
from ctxstore.domain.media_types import checked_media_type
from ctxstore.domain.message_input import is_one_message
from ctxstore.domain.messages import Message
from ctxstore.domain.plain import as_plain
from ctxstore.domain.provider_files import PROVIDERS, with_file_ids


class Attachments:
    """One store's attachments."""

    def __init__(self, core: StoreCore) -> None:
        self.core = core
        self.rows = core.storage.blobs

    # ---- writing ----------------------------------------------------------------------

    def lifted(self, cid: UUID, messages: Any) -> Any:
        """`messages` (one or a list, as a command takes them) with their payloads stored
        and replaced by references; the caller's objects are never changed."""
        one = is_one_message(messages)
        batch = [messages] if one else messages
        if not isinstance(batch, list | tuple):
            return messages  # not messages at all: the command names what is wrong
        out: list[Any] = []
        blobs: list[Blob] = []
        refs: set[str] = set()
        written: list[dict[str, Any]] = []  # messages holding references
        for value in batch:
            plain = as_plain(value)
            if not _lifts(plain):
                out.append(value)
                continue
            plain = copy.deepcopy(plain) if plain is value else plain
            blobs.extend(lift(plain))
            refs.update(r.sha256 for r in references(plain))
            written.append(plain)
            out.append(plain)
        if refs:
            self._keep(cid, blobs, refs)
            # References a caller wrote (to an upload) say what the store holds, not what
            # the caller claimed: the size and dimensions price the image.
            known = {b.ref.sha256: b.ref for b in blobs}
            tenant = self.core.tenant_of(cid)
            for sha in refs - set(known):
                if (held := self.rows.describe(tenant, sha)) is not None:
                    known[sha] = held
            for plain in written:
                restate(plain, known)
        return out[0] if one else out

    def _keep(self, cid: UUID, blobs: list[Blob], refs: set[str]) -> None:
        limit = self.core.settings.max_blob_bytes
        for b in blobs:
            if b.ref.size > limit:
                raise BlobTooLargeError(
                    f"an attachment of {b.ref.size} bytes is over the limit of {limit} "
                    "(CTXSTORE_MAX_BLOB_BYTES)"
                )
        missing = self.rows.keep(self.core.tenant_of(cid), cid, blobs, refs)
        if missing:
            raise InvalidMessageError(
                f"the message refers to blob sha256:{missing[0]}, which this store does not "
                "hold (upload it first: POST /v1/blobs)"
            )

    def put(self, tenant: str | None, data: bytes, media_type: str) -> BlobRef:
        """Store some bytes (an upload) and return their reference; kept once."""
        limit = self.core.settings.max_blob_bytes
        if len(data) > limit:
            raise BlobTooLargeError(
                f"an attachment of {len(data)} bytes is over the limit of {limit} "
                "(CTXSTORE_MAX_BLOB_BYTES)"
            )
        ref = describe(data, checked_media_type(data, media_type))
        self.rows.keep(tenant, UPLOADS, [Blob(ref, data)], set())
        return ref

    # ---- reading ----------------------------------------------------------------------

    def fetch(self, tenant: str | None, sha256: str) -> StoredBlob | None:
        return self.rows.fetch(tenant, sha256)

    def inline_json(self, tenant: str | None, value: Any) -> Any:
        """A copy of message JSON with the data of every reference put back."""

        def data(ref: BlobRef) -> bytes:
            found = self.rows.fetch(tenant, ref.sha256)
            if found is None:
                raise InvalidMessageError(f"blob sha256:{ref.sha256} is missing from the store")
            return found.data

        return inline(value, data)

    def record_file_id(self, tenant: str | None, sha256: str, provider: str, file_id: str) -> None:
        if provider not in PROVIDERS:
            raise InvalidOperationError(f"provider must be one of {', '.join(PROVIDERS)}")
        check_text(file_id, "file_id")
        if not self.rows.record_file_id(tenant, sha256, provider, file_id):
            raise BlobNotFoundError(f"no blob sha256:{sha256[:64]!r}")

    def as_files(self, tenant: str | None, value: Any, provider: str) -> Any:
        """A copy of message JSON whose attachments with a file id at `provider` are given
        as that file id (domain/provider_files.py)."""
        if provider not in PROVIDERS:
            raise InvalidOperationError(f"files must be one of {', '.join(PROVIDERS)}")
        ids = self.rows.file_ids(tenant, sorted({r.sha256 for r in references(value)}))
        return with_file_ids(value, provider, lambda sha: ids.get(sha, {}).get(provider))

    def readable(
        self, tenant: str | None, messages: Sequence[Message], *, inline: bool,
        files: str | None = None,
    ) -> list[Message]:  # fmt: skip
        """The messages with their attachments as `provider`'s file ids where recorded,
        and the rest as their data when `inline` (messages without references as they are)."""
        out = []
        for m in messages:
            if _may_refer(m):
                held = m.stored()
                if has_references(held):
                    if files is not None:
                        held = self.as_files(tenant, held, files)
                    if inline:
                        held = self.inline_json(tenant, held)
                    m = Message.model_validate(held)
            out.append(m)
        return out


UPLOADS = UUID(int=0)  # uploads refer to no context: they stay until a message refers to them


def _may_refer(m: Message) -> bool:
    """A cheap first look: a message whose content is text and whose metadata holds no
    object refers to no attachment (most messages)."""
    if m.native is not None or isinstance(m.content, list):
        return True
    return any(isinstance(v, dict | list) for v in m.metadata.values())


def lifts_any(messages: Any) -> bool:
    """Whether lifting messages (one or a list, as a command takes them) would store or
    look up an attachment: whether writing them needs the database beside the events."""
    batch = [messages] if is_one_message(messages) else messages
    return isinstance(batch, list | tuple) and any(_lifts(as_plain(m)) for m in batch)


def _lifts(plain: Any) -> bool:
    return isinstance(plain, dict) and _may_hold(plain) and holds_attachments(plain)


def _may_hold(value: Any) -> bool:
    """A cheap first look: whether a message could hold a payload or a reference at all
    (any list or dict below its top level)."""
    return any(isinstance(v, dict | list) for v in value.values())
