"""What an image costs in a prompt, by the providers' documented rules.

OpenAI (gpt-4o and later vision models): `detail: "low"` costs 85 tokens; otherwise the
image is scaled to fit 2048 x 2048, then so that its shorter side is at most 768, and costs
85 + 170 per 512 x 512 tile. Anthropic: about width x height / 750 tokens, after scaling
the long edge to at most 1568 pixels. The dimensions are read from the image's own bytes
when it is inline (a data: URL or base64 source: PNG, JPEG, GIF, WebP) or from the
reference of a stored attachment, which records them; an image known only
by its URL costs a labelled estimate (a 1024 x 1024 image at high detail).
"""

from __future__ import annotations

import base64
import binascii
import math
import struct
from typing import NamedTuple
from urllib.parse import parse_qsl

LOW_DETAIL = 85
BASE, PER_TILE, TILE = 85, 170, 512
UNKNOWN_SIZE = (1024, 1024)  # the estimate where the bytes are not at hand
REFERENCE = "ctxstore-blob:"  # a stored attachment's reference (domain/blobs.py)
MAX_HEADER = 64 * 1024  # bytes decoded to find the size (JPEG's frame header comes early)


class Priced(NamedTuple):
    tokens: int
    estimated: bool  # the size was not known: the figure is an estimate


def openai_image_tokens(width: int, height: int, detail: str = "auto") -> int:
    """OpenAI's documented tile formula."""
    if detail == "low":
        return LOW_DETAIL
    if width <= 0 or height <= 0:
        return BASE
    scale = min(1.0, 2048 / max(width, height))
    w, h = width * scale, height * scale
    scale = min(1.0, 768 / min(w, h))
    w, h = w * scale, h * scale
    return BASE + PER_TILE * math.ceil(w / TILE) * math.ceil(h / TILE)


def anthropic_image_tokens(width: int, height: int) -> int:
    """Anthropic's documented estimate, after its resize of the long edge to 1568."""
    scale = min(1.0, 1568 / max(width, height, 1))
    return math.ceil(width * scale * height * scale / 750)


def gemini_image_tokens(width: int, height: int) -> int:
    """Gemini's documented count: 258 for an image at most 384 pixels both ways, else 258
    per 768x768 tile it is cut into."""
    if width <= 384 and height <= 384:
        return 258
    return 258 * math.ceil(width / 768) * math.ceil(height / 768)


def price_openai_url(url: str, detail: str = "auto") -> Priced:
    """An `image_url` part's cost; the size is read from a data: URL's bytes."""
    if detail == "low":
        return Priced(LOW_DETAIL, False)
    size = size_of_data_url(url)
    if size is None:
        return Priced(openai_image_tokens(*UNKNOWN_SIZE, detail), True)
    return Priced(openai_image_tokens(*size, detail), False)


def size_of_data_url(url: str) -> tuple[int, int] | None:
    if url.startswith(REFERENCE):
        return size_of_reference(url)
    if not url.startswith("data:") or ";base64," not in url[:100]:
        return None
    return size_of_base64(url.split(",", 1)[1])


def size_of_reference(uri: str) -> tuple[int, int] | None:
    """The dimensions a stored attachment's reference records (domain/blobs.py)."""
    fields = dict(parse_qsl(uri.partition("?")[2]))
    try:
        return int(fields["width"]), int(fields["height"])
    except (KeyError, ValueError):
        return None


def size_of_base64(data: str) -> tuple[int, int] | None:
    if data.startswith(REFERENCE):
        return size_of_reference(data)
    head = data[: MAX_HEADER * 4 // 3].replace("-", "+").replace("_", "/")  # (URL-safe too)
    head = head[: len(head) - len(head) % 4]
    try:
        return image_size(base64.b64decode(head, validate=False))
    except (binascii.Error, ValueError):
        return None


def image_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) from a PNG, JPEG, GIF or WebP header; None when unreadable."""
    try:
        if data[:8] == b"\x89PNG\r\n\x1a\n":
            width, height = struct.unpack(">II", data[16:24])
            return width, height
        if data[:6] in (b"GIF87a", b"GIF89a"):
            width, height = struct.unpack("<HH", data[6:10])
            return width, height
        if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
            return _webp_size(data)
        if data[:2] == b"\xff\xd8":
            return _jpeg_size(data)
    except struct.error:
        return None
    return None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8 ":
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if chunk == b"VP8L":
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X":
        return int.from_bytes(data[24:27], "little") + 1, int.from_bytes(data[27:30], "little") + 1
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    at = 2
    while at + 9 < len(data):
        if data[at] != 0xFF:
            return None
        marker = data[at + 1]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # no length follows
            at += 2
            continue
        length = struct.unpack(">H", data[at + 2 : at + 4])[0]
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):  # a frame header
            height, width = struct.unpack(">HH", data[at + 5 : at + 9])
            return width, height
        at += 2 + length
    return None
