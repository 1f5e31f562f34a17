"""The four native message shapes, as the SDKs send and return them.

- `openai-chat`: Chat Completions messages (domain/messages.py's Message fields).
- `openai-responses`: Responses API items (`message`, `function_call`, `reasoning`, ...).
- `anthropic`: Anthropic Messages (`system`, user/assistant with content blocks).
- `gemini`: Gemini `Content` (user/model with parts: domain/gemini.py).

A chat message is stored as its fields. A message of the other three is stored as
`{"id", "format", "role", "native": <the payload exactly as it came>, "metadata"}`: `role`
is derived (what the item is in a conversation: user, assistant, system, developer, or
tool for the result of a call) and the payload is never rewritten. What the transcript
rules, token counts and previews need is read from the payload by its shape.

Each shape is one module implementing `Shape` (base.py): chat.py, responses.py,
anthropic.py, gemini.py; registry.py names them in order, detection.py finds a message's.
"""

from ctxstore.domain.shapes.anthropic import ANTHROPIC_BLOCKS, ANTHROPIC_ONLY
from ctxstore.domain.shapes.base import Native, Shape, Source
from ctxstore.domain.shapes.chat import RESULT_ROLES
from ctxstore.domain.shapes.detection import detect, detect_batch
from ctxstore.domain.shapes.names import ANTHROPIC, CHAT, GEMINI, RESPONSES
from ctxstore.domain.shapes.registry import (
    ANSWERED_AT_ONCE,
    CHAT_SHAPE,
    FORMATS,
    NATIVE,
    READ_ORDER,
    SHAPES,
    message_shape,
    read_native,
    shape_named,
    stored_shape,
    texts_of,
)
from ctxstore.domain.shapes.responses import (
    RESPONSES_CALLS,
    RESPONSES_OTHER,
    RESPONSES_OUTPUTS,
    RESPONSES_REQUIRED,
    RESPONSES_TYPES,
    ROLES,
)

__all__ = [
    "ANSWERED_AT_ONCE",
    "ANTHROPIC",
    "ANTHROPIC_BLOCKS",
    "ANTHROPIC_ONLY",
    "CHAT",
    "CHAT_SHAPE",
    "FORMATS",
    "GEMINI",
    "NATIVE",
    "READ_ORDER",
    "RESPONSES",
    "RESPONSES_CALLS",
    "RESPONSES_OTHER",
    "RESPONSES_OUTPUTS",
    "RESPONSES_REQUIRED",
    "RESPONSES_TYPES",
    "RESULT_ROLES",
    "ROLES",
    "SHAPES",
    "Native",
    "Shape",
    "Source",
    "detect",
    "detect_batch",
    "message_shape",
    "read_native",
    "shape_named",
    "stored_shape",
    "texts_of",
]
