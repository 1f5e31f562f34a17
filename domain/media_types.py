"""What an upload's bytes are, from their first bytes, against the media type declared.

A reference carries its media type to every provider request it is inlined into, and an
image's type decides how its tokens are priced: a PNG declared as a JPEG, or a form body
declared by curl's default, would be sent and priced as what it is not.
"""

from __future__ import annotations

from ctxstore.domain.errors import InvalidMessageError
from ctxstore.domain.images import image_size

# Declared by clients that did not say what they send (curl -d, generic uploaders).
UNDECLARED = frozenset({"", "application/octet-stream", "application/x-www-form-urlencoded"})

# Types whose equivalents name the same bytes.
ALIASES = {
    "image/jpg": "image/jpeg",
    "image/pjpeg": "image/jpeg",
    "audio/mp3": "audio/mpeg",
    "audio/x-wav": "audio/wav",
    "audio/wave": "audio/wav",
    "audio/x-flac": "audio/flac",
    "application/x-pdf": "application/pdf",
}


def sniffed(data: bytes) -> str | None:
    """The media type the bytes' signature shows, or None when it shows none known."""
    head = data[:16]
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        return "audio/wav"
    if head.startswith(b"%PDF-"):
        return "application/pdf"
    if head.startswith(b"fLaC"):
        return "audio/flac"
    if head.startswith(b"OggS"):
        return "audio/ogg"
    if head.startswith(b"ID3") or head[:2] in MP3_FRAMES:
        return "audio/mpeg"
    return None


MP3_FRAMES = frozenset({b"\xff\xfb", b"\xff\xfa", b"\xff\xf3", b"\xff\xf2"})  # MPEG-1/2 layer III
SNIFFED = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp", "audio/wav",
                     "application/pdf", "audio/flac", "audio/ogg", "audio/mpeg"})  # fmt: skip
# Signatures no other format starts with: bytes with one are that format, whatever declared.
UNMISTAKABLE = frozenset({"image/png", "image/gif", "image/webp", "application/pdf"})


def checked_media_type(data: bytes, declared: str) -> str:
    """The media type to store an upload under: the declared one when the bytes agree,
    the sniffed one when none was really declared; raises InvalidMessageError when the
    bytes are something else than declared, or an image whose size cannot be read."""
    kind = declared.split(";")[0].strip().lower()
    kind = ALIASES.get(kind, kind)
    found = sniffed(data)
    if kind in UNDECLARED:
        if found is not None:
            return found
        if kind == "application/x-www-form-urlencoded":
            raise InvalidMessageError(
                "the upload was declared application/x-www-form-urlencoded (curl's default"
                " for -d) and its bytes are no known file type: send its media type as"
                " Content-Type (curl --data-binary @file -H 'Content-Type: image/png')"
            )
        return "application/octet-stream"
    if found is not None and found != kind and (kind in SNIFFED or found in UNMISTAKABLE):
        raise InvalidMessageError(f"the upload was declared {kind}, but its bytes are {found}")
    if found is None and kind in SNIFFED - {"audio/mpeg"}:  # (an MP3 may start untagged)
        raise InvalidMessageError(f"the upload was declared {kind}, but its bytes are not one")
    if kind.startswith("image/") and kind != "image/svg+xml" and image_size(data[:65536]) is None:
        raise InvalidMessageError(
            f"the upload was declared {kind}, but its size cannot be read from its bytes"
            " (PNG, JPEG, GIF and WebP are read; a model prices an image by its size)"
        )
    return kind
