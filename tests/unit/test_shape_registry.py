"""One interface per message shape: every registered shape implements all of it, the registry
names exactly the four, and no module outside domain/shapes/ compares a shape's name."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from ctxstore.domain.shapes import FORMATS, NATIVE, SHAPES, Shape, shape_named
from ctxstore.domain.shapes.registry import READ_ORDER

ROOT = Path(__file__).resolve().parents[2]
# The interface: what every shape must say (abstract), and the hooks with a default most
# shapes keep (a shape overrides where it differs).
INTERFACE = sorted(n for n, v in vars(Shape).items() if callable(v) and not n.startswith("_"))
ABSTRACT = sorted(Shape.__abstractmethods__)
FLAGS = ("name", "native", "answers_at_once", "turn_in_items", "tokenizer_published")
NAMES = r'(?:GEMINI|ANTHROPIC|CHAT|RESPONSES|"gemini"|"anthropic"|"openai-chat"|"openai-responses")'
# A shape's name compared (==, !=, in, not in), on either side.
COMPARISON = re.compile(
    rf"(?:==|!=|\bin\b|\bnot in\b)\s*\(?\s*{NAMES}(?![\w-])|(?<![\w-]){NAMES}\s*(?:==|!=)"
)


def test_the_registry_names_exactly_the_four_shapes_in_order():
    assert FORMATS == ("openai-chat", "openai-responses", "anthropic", "gemini")
    assert NATIVE == ("openai-responses", "anthropic", "gemini")
    assert [shape.name for shape in SHAPES.values()] == list(FORMATS)
    assert {shape.name for shape in READ_ORDER} == set(FORMATS)
    assert shape_named("openai") is None and shape_named(None) is None


@pytest.mark.parametrize("name", FORMATS)
def test_every_shape_implements_every_method(name):
    shape = SHAPES[name]
    kind = type(shape)
    assert isinstance(shape, Shape) and not inspect.isabstract(kind)
    assert len(INTERFACE) == 18 and set(ABSTRACT) < set(INTERFACE)
    for method in INTERFACE:
        assert callable(getattr(shape, method))
    for method in ABSTRACT:
        assert method in vars(kind), f"{kind.__name__} does not implement {method}"
    for flag in FLAGS:
        assert flag in vars(kind), f"{kind.__name__} does not say its {flag}"


def test_an_interface_without_a_method_cannot_be_registered():
    class Partial(Shape):
        name = "partial"

    with pytest.raises(TypeError, match="abstract"):
        Partial()


@pytest.mark.parametrize("name", FORMATS)
def test_each_shape_opens_a_reply_it_reads_as_an_assistant(name):
    shape = SHAPES[name]
    opening = shape.opening()
    if shape.native:  # an empty reply streams: its payload is read once it holds something
        assert shape.by_type(opening) or shape.takes_plain(opening)
    else:
        assert shape.read(opening).role == "assistant"


def _sources() -> list[Path]:
    found = [ROOT / "capture.py", ROOT / "__init__.py"]
    for folder in ("domain", "adapters", "projections"):
        found += sorted((ROOT / folder).rglob("*.py"))
    shapes = ROOT / "domain" / "shapes"
    return [p for p in found if shapes not in p.parents]


def comparisons(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if COMPARISON.search(line)]


def test_no_module_outside_the_shapes_compares_a_shape_name():
    found = {}
    for path in _sources():
        lines = comparisons(path.read_text(encoding="utf-8"))
        if lines:
            found[str(path.relative_to(ROOT))] = lines
    assert not found, found


def test_the_scan_would_catch_a_comparison():
    assert comparisons('if m.format == GEMINI:\n    pass\nelif fmt in (ANTHROPIC, "x"):')
    assert comparisons('ok = "openai-chat" != shape')
    assert comparisons('if shape not in ("openai-responses",):')
    # Capture API names and other words that begin alike are not shape names.
    assert not comparisons("if api == RESPONSES_API:\nchat = x in CHAT_FIELDS")
    assert not comparisons('if provider == "anthropic.messages":')
