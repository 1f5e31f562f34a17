"""A corpus of provider payloads in the four shapes — the forms the providers document,
in several languages, with images (lifted into the attachment store and put back), tool
calls and their results, thinking and its signatures — stored on every backend and read
back in its own shape exactly; Anthropic's and Gemini's through their SDKs' own types too."""

from __future__ import annotations

import base64
import copy
import struct
import zlib
from typing import Any

import pytest
from anthropic.types import ContentBlock
from pydantic import TypeAdapter

from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore


def png(width: int, height: int) -> bytes:
    """A real PNG of that size (grey), large enough to be stored as an attachment."""
    raw = b"".join(
        b"\x00" + bytes([(x * 7 + y) % 256 for x in range(width)]) for y in range(height)
    )

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    head = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", head)
        + chunk(b"IDAT", zlib.compress(raw, 0))
        + chunk(b"IEND", b"")
    )


IMAGE = png(48, 40)
B64 = base64.b64encode(IMAGE).decode()
URLSAFE = base64.urlsafe_b64encode(IMAGE).decode()
SIGNATURE = base64.b64encode(b"\x12\x34gemini-thought-signature\xff\xfe").decode()

CHAT = [
    {"role": "system", "content": "Réponds en français, brièvement."},
    {"role": "user", "content": [
        {"type": "text", "text": "这张图片里是什么？ Что на картинке?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{B64}", "detail": "high"}}]},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_9x", "type": "function", "function": {"name": "describe_image",
                                                           "arguments": '{"lang": "fr"}'}}]},
    {"role": "tool", "tool_call_id": "call_9x", "content": "Un dégradé gris."},
    {"role": "assistant", "content": "Un dégradé gris. 🎨", "refusal": None,
     "annotations": [], "reasoning_content": "L'outil a répondu."},
]  # fmt: skip
RESPONSES = [
    {"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "ما هو الطقس في دبي؟"},
        {"type": "input_image", "image_url": f"data:image/png;base64,{B64}", "detail": "auto"}]},
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Need the tool."}],
     "encrypted_content": "gAAAAABn-encrypted=="},
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather",
     "arguments": '{"city": "دبي"}', "status": "completed"},
    {"type": "function_call_output", "call_id": "call_1", "output": '{"temp_c": 38}'},
    {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": [
        {"type": "output_text", "text": "الجو حار: ٣٨ درجة.", "annotations": []}]},
]  # fmt: skip
ANTHROPIC = [
    {"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": B64}},
        {"type": "text", "text": "この画像を説明して、天気も調べて。", "cache_control": {"type": "ephemeral"}}]},
    {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "画像はグレー。天気ツールを呼ぶ。", "signature": "EqQBCkYIBxgCKkB=="},
        {"type": "tool_use", "id": "toolu_01A", "name": "get_weather", "input": {"city": "東京"}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01A",
                                  "content": [{"type": "text", "text": "晴れ、22°C"}]}]},
    {"role": "assistant", "content": [{"type": "text", "text": "グレーの画像です。東京は晴れ、22°C。"}]},
]  # fmt: skip
GEMINI = [
    {"role": "user", "parts": [
        {"text": "Beschreibe das Bild und rechne 2¹⁰ aus."},
        {"inline_data": {"mime_type": "image/png", "data": URLSAFE}}]},
    {"role": "model", "parts": [
        {"text": "Das Bild zeigt…", "thought": True},
        {"function_call": {"id": "fc-1", "name": "power", "args": {"base": 2, "exp": 10}},
         "thought_signature": SIGNATURE}]},
    {"role": "user", "parts": [
        {"function_response": {"id": "fc-1", "name": "power", "response": {"result": 1024}}}]},
    {"role": "model", "parts": [
        {"executable_code": {"language": "PYTHON", "code": "print(2**10)"}},
        {"code_execution_result": {"outcome": "OUTCOME_OK", "output": "1024\n"}},
        {"text": "Ein grauer Verlauf; 2¹⁰ = 1024. ✅"}]},
]  # fmt: skip
GEMINI_REST = [  # the REST API's camelCase, standard base64
    {"role": "user", "parts": [{"text": "¿Qué ves?"},
                               {"inlineData": {"mimeType": "image/png", "data": B64}}]},
    {"role": "model", "parts": [{"text": "Un degradado.", "thoughtSignature": SIGNATURE}]},
]  # fmt: skip


@pytest.fixture
def store(store_url):
    with ContextStore.from_url(store_url, Settings(actor="t")) as s:
        yield s


def read_back(store: ContextStore, cid: Any, shape: str) -> Any:
    seen = store.visible(cid, inline=True)
    if shape == "openai-chat":
        return seen.to_openai(exact=True)
    if shape == "openai-responses":
        return seen.to_responses()
    if shape == "anthropic":
        return seen.to_anthropic(exact=True)["messages"]
    return seen.to_gemini()["contents"]


@pytest.mark.parametrize(
    ("shape", "corpus"),
    [("openai-chat", CHAT), ("openai-responses", RESPONSES), ("anthropic", ANTHROPIC),
     ("gemini", GEMINI), ("gemini", GEMINI_REST)],
    ids=["chat", "responses", "anthropic", "gemini", "gemini-rest"],
)  # fmt: skip
def test_the_corpus_reads_back_exactly_in_its_own_shape(store, shape, corpus):
    given = copy.deepcopy(corpus)
    cid = store.create()
    if shape == "anthropic":  # its system prompt is separate; its messages are all there is
        store.insert(cid, given, format=shape)
    else:
        store.insert(cid, given)
    assert given == corpus  # the caller's objects are not changed
    stored = store.visible(cid)
    assert any("ctxstore-blob:" in str(m.native or m.content) for m in stored.messages), (
        "the image was not stored as an attachment"
    )
    found = read_back(store, cid, shape)
    expected = corpus[1:] if shape == "anthropic" and corpus[0]["role"] == "system" else corpus
    assert found == expected


def test_gemini_sdk_objects_round_trip_through_the_store(store):
    """types.Content in, types.Content out: bytes (inline data, thought signatures) exact."""
    types = pytest.importorskip("google.genai.types")
    contents = [types.Content.model_validate(c) for c in GEMINI]
    cid = store.create()
    store.insert(cid, contents)
    back = [
        types.Content.model_validate(c)
        for c in store.visible(cid, inline=True).to_gemini()["contents"]
    ]
    assert back == contents
    assert back[0].parts[1].inline_data.data == IMAGE
    assert back[1].parts[1].thought_signature == base64.b64decode(SIGNATURE)


def test_anthropic_sdk_blocks_round_trip_through_the_store(store):
    """The corpus's replies as the Anthropic SDK's own content blocks (the installed major's
    types): stored, read back as the corpus, and validated back into the same blocks."""
    blocks = TypeAdapter(list[ContentBlock])
    replies = [blocks.validate_python(m["content"]) for m in ANTHROPIC if m["role"] == "assistant"]
    given = iter(replies)
    turns = [
        {"role": "assistant", "content": next(given)} if m["role"] == "assistant" else m
        for m in copy.deepcopy(ANTHROPIC)
    ]
    cid = store.create()
    store.insert(cid, turns, format="anthropic")
    found = read_back(store, cid, "anthropic")
    assert found == ANTHROPIC
    back = [blocks.validate_python(m["content"]) for m in found if m["role"] == "assistant"]
    assert back == replies
    assert [type(b).__name__ for b in back[0]] == ["ThinkingBlock", "ToolUseBlock"]
