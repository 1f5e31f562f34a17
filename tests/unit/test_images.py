"""Images are priced, not counted as 0: OpenAI's tile formula with the size read from the
image's own bytes; without them, a labelled estimate."""

import base64
import struct

from ctxstore.domain.images import (
    anthropic_image_tokens,
    image_size,
    openai_image_tokens,
    price_openai_url,
)
from ctxstore.domain.tokens import ESTIMATE, message_cost, message_tokens


def png(width: int, height: int) -> bytes:
    ihdr = struct.pack(">II", width, height) + b"\x08\x02\x00\x00\x00"
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + ihdr + b"\x00" * 4


def jpeg(width: int, height: int) -> bytes:
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00" + b"\x00" * 9
    sof = b"\xff\xc0" + struct.pack(">HBHH", 17, 8, height, width) + b"\x03" + b"\x00" * 9
    return b"\xff\xd8" + app0 + sof + b"\xff\xd9"


def gif(width: int, height: int) -> bytes:
    return b"GIF89a" + struct.pack("<HH", width, height) + b"\x00" * 8


def webp_vp8x(width: int, height: int) -> bytes:
    body = b"VP8X" + struct.pack("<I", 10) + b"\x00" * 4
    body += (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    return b"RIFF" + struct.pack("<I", len(body) + 4) + b"WEBP" + body


def data_url(data: bytes, kind: str = "png") -> str:
    return f"data:image/{kind};base64," + base64.b64encode(data).decode()


def test_sizes_are_read_from_the_bytes():
    assert image_size(png(1024, 768)) == (1024, 768)
    assert image_size(jpeg(640, 480)) == (640, 480)
    assert image_size(gif(32, 16)) == (32, 16)
    assert image_size(webp_vp8x(300, 200)) == (300, 200)
    assert image_size(b"not an image") is None


def test_openai_tile_formula():
    assert openai_image_tokens(1024, 768) == 85 + 170 * 4  # 2 x 2 tiles
    assert openai_image_tokens(4096, 4096) == 85 + 170 * 4  # 2048 -> 768 x 768
    assert openai_image_tokens(512, 512) == 85 + 170
    assert openai_image_tokens(2048, 4096, "high") == 1105  # OpenAI's own worked example
    assert openai_image_tokens(1024, 768, "low") == 85
    assert anthropic_image_tokens(1000, 1000) == 1334


def test_a_message_with_an_image_costs_its_tiles_and_labels_an_unknown_size():
    part = {"type": "image_url", "image_url": {"url": data_url(png(1024, 768))}}
    message = {"role": "user", "content": [{"type": "text", "text": "what is it?"}, part]}
    tokens, estimated = message_cost(message, ExactWords())
    assert tokens == message_tokens(message, ExactWords()) + 765 and not estimated
    remote = {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}
    tokens, estimated = message_cost({"role": "user", "content": [remote]}, ExactWords())
    assert estimated and tokens >= 765
    low = {"type": "image_url", "image_url": {"url": "https://x/y.png", "detail": "low"}}
    assert message_cost({"role": "user", "content": [low]}, ExactWords())[1] is False
    audio = {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}
    assert message_cost({"role": "user", "content": [audio]}, ExactWords())[1] is True
    assert price_openai_url(data_url(jpeg(2048, 2048), "jpeg")).tokens == 765
    assert message_cost({"role": "user", "content": "hi"}, ESTIMATE)[1] is True


class ExactWords:
    name, exact = "words", True

    def count(self, text: str) -> int:
        return len(text.split())
