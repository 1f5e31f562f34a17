"""Output to a person's terminal: control characters in stored text (escape sequences that
retitle or clear the terminal, carriage returns that overwrite a line, bidirectional
overrides that reorder it) are shown as escapes, never obeyed."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text

_C0 = [*range(0x09), *range(0x0B, 0x20), 0x7F]  # all but tab and newline
_C1 = list(range(0x80, 0xA0))
_BIDI = [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]
# Text for a person: each as its Python escape.
SHOWN = {c: f"\\x{c:02x}" for c in (*_C0, *_C1)} | {c: f"\\u{c:04x}" for c in _BIDI}
# JSON already escapes C0; C1 and bidirectional controls get JSON's own \\u escapes.
JSON_SHOWN = {c: f"\\u{c:04x}" for c in (0x7F, *_C1, *_BIDI)}


def shown(text: str) -> str:
    """The text with every control character written out as an escape."""
    return text.translate(SHOWN)


def json_shown(text: str) -> str:
    """JSON text whose strings hold no raw control character (same JSON value)."""
    return text.translate(JSON_SHOWN)


class SafeConsole(Console):
    """A rich Console that shows control characters in every string it renders."""

    def render_str(self, text: str, **kwargs: Any) -> Text:
        return super().render_str(shown(text), **kwargs)


def shown_text(text: str, style: str = "") -> Text:
    """A rich Text of stored text, its control characters shown."""
    return Text(shown(text), style=style)
