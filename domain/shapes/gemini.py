"""Gemini `Content` (`gemini`): user and model turns with parts (domain/gemini.py reads one,
domain/conversion_gemini.py converts, domain/gemini_stream.py streams)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from ctxstore.domain import gemini_stream
from ctxstore.domain.conversion_gemini import gemini_to_chat, to_gemini
from ctxstore.domain.conversion_losses import Conversion
from ctxstore.domain.gemini import GEMINI, field, looks_like
from ctxstore.domain.gemini import read as read_content
from ctxstore.domain.gemini import texts as content_texts
from ctxstore.domain.images import UNKNOWN_SIZE, gemini_image_tokens, size_of_base64
from ctxstore.domain.shapes.base import JSON, Native, Shape, Source

if TYPE_CHECKING:
    from ctxstore.domain.messages import Message


def gemini_parts_cost(content: dict[str, Any]) -> tuple[int, bool]:
    """A Gemini Content's inline images by Gemini's count (from their bytes, else
    estimated); other inline data and file URIs make the count an estimate."""
    total, estimated = 0, False
    for part in content.get("parts") or []:
        blob = field(part, "inline_data") if isinstance(part, dict) else None
        if isinstance(blob, dict) and str(field(blob, "mime_type") or "").startswith("image/"):
            size = size_of_base64(str(blob.get("data", "")))
            total += gemini_image_tokens(*(size or UNKNOWN_SIZE))
            estimated = estimated or size is None
        elif isinstance(part, dict) and (blob is not None or field(part, "file_data")):
            estimated = True
    return total, estimated


class GeminiShape(Shape):
    """`gemini`: a Gemini Content, kept as it came."""

    name = GEMINI
    native = True
    answers_at_once = True
    turn_in_items = False
    tokenizer_published = False

    def by_type(self, data: JSON) -> bool:
        return data.get("type") is None and looks_like(data)

    def takes_plain(self, message: JSON) -> bool:
        return False  # a Content has parts, never content

    def read(self, payload: JSON) -> Native:
        role, calls, answers, _thought = read_content(payload)
        # (thoughts live inside their turn, as Anthropic's thinking blocks do)
        return Native(GEMINI, role, calls, answers, False)

    def texts(self, payload: JSON) -> list[str]:
        return content_texts(payload)

    def parts_cost(self, payload: JSON) -> tuple[int, bool]:
        return gemini_parts_cost(payload)

    def to_chat(self, m: Message, done: Conversion) -> list[JSON]:
        return gemini_to_chat(m, cast(JSON, m.native), done)

    def convert(
        self, messages: Sequence[Message], source: Source, *, store: bool, exact: bool
    ) -> Conversion:
        return to_gemini(
            messages, lambda m, done: source(m).as_chat(m, done), lambda m: source(m) is self
        )

    def opening(self) -> JSON:
        return {"role": "model", "parts": []}

    def stream_deltas(self, event: JSON, n: int) -> list[JSON] | None:
        return gemini_stream.chunk_deltas(event) if gemini_stream.is_chunk(event) else None

    def apply_delta(self, payload: JSON, delta: JSON, partial: dict[str, str]) -> None:
        gemini_stream.apply(payload, delta, partial)

    def finished(self, payload: JSON, partial: dict[str, str]) -> JSON:
        return gemini_stream.finish(payload, partial)

    def repaired(
        self, m: Message, answered: set[str], last: bool, notes: list[JSON]
    ) -> Message | None:
        return gemini_stream.repaired(m, answered, last, notes)
