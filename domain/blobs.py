"""Attachments by reference: images, audio and files stored once, by their content's hash.

A message's inline payload — a `data:` URL (OpenAI image_url, input_image, file_data),
an Anthropic base64 `source`, an OpenAI `input_audio`, Gemini's `inline_data` (in Google
ADK's events) — is lifted out when it is written:
the bytes are stored once per tenant under their sha256, and the message keeps a reference
in the payload's own place:

    ctxstore-blob:sha256:<64 hex>?type=image/png&bytes=1048576&width=1024&height=768&as=data-url

The reference says what the store knows about the bytes (media type, size, an image's
dimensions, which token pricing reads) and how they were written (`as`: a data: URL,
bare base64, or URL-safe base64), so putting the data back gives the message exactly as it came. A payload is
lifted only when it is at least LIFT_BYTES decoded and its base64 is canonical (encoding
the decoded bytes again gives the same text), so nothing changes by being stored.
Everything here is pure: the store's adapters keep and fetch the bytes.
"""

from __future__ import annotations

import base64
import binascii
import copy
import hashlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, quote

from ctxstore.domain.errors import InvalidMessageError
from ctxstore.domain.images import REFERENCE, image_size
from ctxstore.domain.json_values import MAX_DEPTH

SCHEME = REFERENCE
SIZE_HEADER = "X-Ctxstore-Image-Size"  # a blob download's image width x height, when known
LIFT_BYTES = 1024  # smaller payloads stay inline: a reference would save nothing
DATA_URL = re.compile(r"data:([\w.+-]+/[\w.+-]+);base64,", re.ASCII)
SHA = re.compile(r"[0-9a-f]{64}")
MEDIA_TYPE = re.compile(r"[\w.+-]+/[\w.+-]+", re.ASCII)
FORMS = ("data-url", "base64", "base64url")
DATA_URL_KEYS = frozenset({"url", "image_url", "file_data"})  # where the shapes put data: URLs
REF_KEYS = DATA_URL_KEYS | {"data"}  # and bare base64 (an Anthropic source, input_audio)


@dataclass(frozen=True)
class BlobRef:
    """What a message's reference says about the bytes it stands for."""

    sha256: str
    media_type: str
    size: int
    width: int | None = None
    height: int | None = None
    form: str = "data-url"  # how the payload was written: a data: URL or bare base64

    def uri(self) -> str:
        query = f"type={quote(self.media_type, safe='/')}&bytes={self.size}"
        if self.width is not None and self.height is not None:
            query += f"&width={self.width}&height={self.height}"
        return f"{SCHEME}sha256:{self.sha256}?{query}&as={self.form}"

    def payload(self, data: bytes) -> str:
        """The inline text this reference stands for, as it was written."""
        if self.form == "base64url":  # Gemini's inline_data, as pydantic writes bytes
            return base64.urlsafe_b64encode(data).decode("ascii")
        text = base64.b64encode(data).decode("ascii")
        return f"data:{self.media_type};base64,{text}" if self.form == "data-url" else text


@dataclass(frozen=True)
class StoredBlob:
    """A stored attachment: what its reference says and its bytes (every face's `blob`)."""

    ref: BlobRef
    data: bytes


@dataclass(frozen=True)
class Blob:
    ref: BlobRef
    data: bytes


def describe(data: bytes, media_type: str, form: str = "data-url") -> BlobRef:
    """The reference of some bytes: their hash, size and (an image's) dimensions."""
    if not MEDIA_TYPE.fullmatch(media_type):
        raise InvalidMessageError(
            f"a blob's media type must be type/subtype, got {media_type!r:.80}"
        )
    size = image_size(data[: 64 * 1024]) if media_type.startswith("image/") else None
    width, height = size if size else (None, None)
    digest = hashlib.sha256(data).hexdigest()
    return BlobRef(digest, media_type, len(data), width, height, form)


def is_ref(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(SCHEME)


def parse_ref(uri: str) -> BlobRef:
    """A reference's fields; raises InvalidMessageError for a malformed one."""
    path, _, query = uri[len(SCHEME) :].partition("?")
    algorithm, _, digest = path.partition(":")
    fields = dict(parse_qsl(query))
    try:
        ref = BlobRef(
            sha256=digest, media_type=fields["type"], size=int(fields["bytes"]),
            width=int(fields["width"]) if "width" in fields else None,
            height=int(fields["height"]) if "height" in fields else None,
            form=fields.get("as", "data-url"),
        )  # fmt: skip
    except (KeyError, ValueError):
        ref = None
    if (
        ref is None or algorithm != "sha256" or not SHA.fullmatch(digest)
        or not MEDIA_TYPE.fullmatch(ref.media_type) or ref.form not in FORMS or ref.size < 0
    ):  # fmt: skip
        raise InvalidMessageError(f"malformed blob reference {uri[:120]!r}")
    return ref


def _decoded(text: str, form: str = "base64") -> bytes | None:
    """The bytes of canonical base64 (re-encoding gives the same text), else None."""
    url = form == "base64url"
    try:
        data = (base64.urlsafe_b64decode if url else base64.b64decode)(text.encode("ascii"))
    except (binascii.Error, ValueError, UnicodeEncodeError):
        return None
    again = (base64.urlsafe_b64encode if url else base64.b64encode)(data).decode("ascii")
    return data if again == text else None


def _payloads(node: Any, depth: int = 0) -> Iterator[tuple[Any, Any, str | None, str]]:
    """(container, key, media type of a bare payload or None for a data: URL, form) of
    every inline payload in a message's JSON, where its shape puts one (a data: URL as a
    text part's text is text, and stays). Nothing deeper than MAX_DEPTH is looked into:
    such a message is refused when it is checked."""
    if depth > MAX_DEPTH:
        return
    if isinstance(node, dict):
        if node.get("type") == "base64" and isinstance(node.get("media_type"), str):
            yield node, "data", node["media_type"], "base64"  # an Anthropic source
        elif isinstance(node.get("data"), str) and isinstance(
            mime := node.get("mime_type", node.get("mimeType")), str
        ):
            yield node, "data", mime, "base64url"  # Gemini's inline_data (either spelling)
        for key, value in node.items():
            if key == "input_audio" and isinstance(value, dict):
                fmt = value.get("format")
                if isinstance(fmt, str):
                    yield value, "data", f"audio/{fmt}", "base64"
            if key in DATA_URL_KEYS and isinstance(value, str) and value.startswith("data:"):
                yield node, key, None, "data-url"
            elif isinstance(value, dict | list):
                yield from _payloads(value, depth + 1)
    elif isinstance(node, list):
        for value in node:
            if isinstance(value, dict | list):
                yield from _payloads(value, depth + 1)


def lift(message: Any, min_bytes: int = LIFT_BYTES) -> list[Blob]:
    """Replace each inline payload of a message's JSON (in place) by its reference; the
    blobs lifted out. Payloads that are small or not canonical base64 stay inline."""
    lifted = []
    for container, key, media_type, form in list(_payloads(message)):
        text = container[key]
        if not isinstance(text, str) or len(text) < min_bytes:
            continue
        if media_type is None:
            head = DATA_URL.match(text)
            if head is None:
                continue
            mt, body = head.group(1), text[head.end() :]
        else:
            mt, body = media_type, text
        if not MEDIA_TYPE.fullmatch(mt):
            continue
        data = _decoded(body, form)
        if data is None and form == "base64url":  # Gemini's REST form: standard base64
            form = "base64"
            data = _decoded(body, form)
        if data is None or len(data) < min_bytes:
            continue
        ref = describe(data, mt, form)
        container[key] = ref.uri()
        lifted.append(Blob(ref, data))
    return lifted


def holds_attachments(node: Any, min_bytes: int = LIFT_BYTES) -> bool:
    """Whether a message's JSON holds a reference, or a payload big enough to lift (a
    look that changes nothing: most messages hold neither)."""
    if any(isinstance(t, str) and len(t) >= min_bytes for t in _texts(_payloads(node))):
        return True
    return has_references(node)


def has_references(node: Any) -> bool:
    """Whether a message's JSON refers to any blob."""
    return any(True for _ in _ref_texts(node))


def _texts(found: Iterator[tuple[Any, Any, str | None, str]]) -> Iterator[Any]:
    for container, key, _, _ in found:
        yield container[key]


def _ref_slots(node: Any, depth: int = 0) -> Iterator[tuple[dict[str, Any], str]]:
    """(container, key) of each reference in a message's JSON: where a payload was (a
    string under REF_KEYS); the one walk every reader of references shares (no deeper
    than MAX_DEPTH)."""
    if depth > MAX_DEPTH:
        return
    if isinstance(node, dict):
        for key, value in node.items():
            if isinstance(value, str):
                if key in REF_KEYS and is_ref(value):
                    yield node, key
            elif isinstance(value, dict | list):
                yield from _ref_slots(value, depth + 1)
    elif isinstance(node, list):
        for value in node:
            if isinstance(value, dict | list):
                yield from _ref_slots(value, depth + 1)


def _ref_texts(node: Any) -> Iterator[str]:
    """The references in a message's JSON."""
    for container, key in _ref_slots(node):
        yield container[key]


def restate(node: Any, known: dict[str, BlobRef]) -> None:
    """Rewrite (in place) each reference in a message's JSON with what is known of its
    blob (media type, size, dimensions), keeping how its payload was written: a reference a
    caller wrote itself says only what the store holds."""
    for container, key in _ref_slots(node):
        ref = parse_ref(container[key])
        if (held := known.get(ref.sha256)) is not None:
            container[key] = BlobRef(held.sha256, held.media_type, held.size, held.width,
                                     held.height, ref.form).uri()  # fmt: skip


def references(node: Any) -> Iterator[BlobRef]:
    """Every blob reference in a message's JSON."""
    for text in _ref_texts(node):
        yield parse_ref(text)


def inline(node: Any, fetch: Callable[[BlobRef], bytes]) -> Any:
    """A copy of a message's JSON with each reference replaced by its payload, as written."""
    if not has_references(node):
        return node
    copied = copy.deepcopy(node)
    for container, key in list(_ref_slots(copied)):
        ref = parse_ref(container[key])
        container[key] = ref.payload(fetch(ref))
    return copied
