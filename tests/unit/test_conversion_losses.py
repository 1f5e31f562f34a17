"""Conversions lose nothing silently: generated conversations of every shape (texts in
several scripts, images, files, documents, tool calls and results with error flags, custom
tools, reasoning and thinking, fields a provider adds) converted into every other shape.
Every value of a source message appears in the converted payload or is named in the
conversion's `omitted` for that message (by its field, or by the kind of part it is in):
texts are values like any other."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.domain.conversions import convert

from ..conftest import examples

SHAPES = ["openai-chat", "openai-responses", "anthropic", "gemini"]
PDF = "JVBERi0xLjQKJcfs"  # the start of a PDF, base64
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
URLSAFE = PNG.replace("+", "-").replace("/", "_")  # Gemini's inline data, as the SDK writes it
words = st.text(
    alphabet=st.sampled_from("abcxyz ÄéßДжЖ中文字東京ありがとうمرحبا😀"), min_size=3, max_size=12
).filter(lambda t: t.strip() == t and t)
ids = st.text(alphabet="abcdef0123456789", min_size=6, max_size=10)
extra = st.dictionaries(
    st.sampled_from(["x_vendor", "x_trace"]), st.text(alphabet="pqrstuvw", min_size=4, max_size=8),
    max_size=1,
)  # fmt: skip


# ---- conversations in each shape ------------------------------------------------------------


@st.composite
def chat(draw: st.DrawFn) -> list[dict]:
    parts: list[dict] = [{"type": "text", "text": draw(words)}]
    for kind in draw(st.lists(st.sampled_from(["image", "file", "file_id", "url"]), max_size=2)):
        if kind == "image":
            parts.append(
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}
            )
        elif kind == "url":
            parts.append({"type": "image_url", "image_url": {"url": "https://example.com/a.png"}})
        elif kind == "file":
            parts.append({"type": "file", "file": {
                "file_data": f"data:application/pdf;base64,{PDF}", "filename": draw(words) + ".pdf"}})  # fmt: skip
        else:
            parts.append({"type": "file", "file": {"file_id": "file-" + draw(ids)}})
    turn = [
        {"role": "user", "content": parts if len(parts) > 1 else parts[0]["text"], **draw(extra)}
    ]
    if draw(st.booleans()):
        turn.insert(0, {"role": "system", "content": draw(words)})
    if draw(st.booleans()):
        call_id = "call_" + draw(ids)
        if draw(st.booleans()):
            call = {
                "id": call_id,
                "type": "custom",
                "custom": {"name": "python", "input": draw(words)},
            }
        else:
            arguments = json.dumps(
                {"q": draw(words), "n": draw(st.integers(1, 999))}, ensure_ascii=False
            )
            call = {
                "id": call_id,
                "type": "function",
                "function": {"name": "lookup", "arguments": arguments},
            }
        turn.append({"role": "assistant", "content": draw(st.none() | words), "tool_calls": [call]})
        turn.append({"role": "tool", "tool_call_id": call_id, "content": draw(words)})
    turn.append({"role": "assistant", "content": draw(words)})
    return turn


@st.composite
def responses(draw: st.DrawFn) -> list[dict]:
    content: list[dict] = [{"type": "input_text", "text": draw(words)}]
    for kind in draw(st.lists(st.sampled_from(["image", "file", "file_url"]), max_size=2)):
        if kind == "image":
            content.append(
                {
                    "type": "input_image",
                    "image_url": f"data:image/png;base64,{PNG}",
                    "detail": "auto",
                }
            )
        elif kind == "file":
            content.append({"type": "input_file", "file_data": f"data:application/pdf;base64,{PDF}",
                            "filename": draw(words) + ".pdf"})  # fmt: skip
        else:
            content.append({"type": "input_file", "file_url": "https://example.com/" + draw(ids)})
    turn: list[dict] = [{"type": "message", "role": "user", "content": content}]
    if draw(st.booleans()):
        turn.append({"type": "reasoning", "id": "rs_" + draw(ids), "summary": [
            {"type": "summary_text", "text": draw(words)}], "encrypted_content": draw(ids)})  # fmt: skip
    if draw(st.booleans()):
        call_id = "call_" + draw(ids)
        if draw(st.booleans()):
            turn.append({"type": "custom_tool_call", "call_id": call_id, "name": "python",
                         "input": draw(words), "id": "ctc_" + draw(ids)})  # fmt: skip
            turn.append(
                {"type": "custom_tool_call_output", "call_id": call_id, "output": draw(words)}
            )
        else:
            turn.append({"type": "function_call", "call_id": call_id, "name": "lookup",
                         "arguments": json.dumps({"q": draw(words)}, ensure_ascii=False),
                         "id": "fc_" + draw(ids), "status": "completed"})  # fmt: skip
            turn.append({"type": "function_call_output", "call_id": call_id, "output": draw(words)})
    turn.append({"type": "message", "role": "assistant", "id": "msg_" + draw(ids), "status": "completed",
                 "content": [{"type": "output_text", "text": draw(words), "annotations": []}]})  # fmt: skip
    return turn


@st.composite
def anthropic(draw: st.DrawFn) -> list[dict]:
    blocks: list[dict] = [{"type": "text", "text": draw(words)}]
    for kind in draw(
        st.lists(st.sampled_from(["image", "pdf", "text_doc", "url_doc"]), max_size=2)
    ):
        if kind == "image":
            blocks.append(
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": PNG},
                }
            )
        elif kind == "pdf":
            blocks.append({"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                                          "data": PDF}, "title": draw(words)})  # fmt: skip
        elif kind == "text_doc":
            blocks.append({"type": "document", "source": {"type": "text", "media_type": "text/plain",
                                                          "data": draw(words)}})  # fmt: skip
        else:
            blocks.append(
                {"type": "document", "source": {"type": "url", "url": "https://example.com/d.pdf"}}
            )
    turn: list[dict] = [{"role": "user", "content": blocks}]
    reply: list[dict] = []
    if draw(st.booleans()):
        reply.append({"type": "thinking", "thinking": draw(words), "signature": draw(ids)})
    reply.append({"type": "text", "text": draw(words)})
    if draw(st.booleans()):
        use_id = "toolu_" + draw(ids)
        reply.append(
            {"type": "tool_use", "id": use_id, "name": "lookup", "input": {"q": draw(words)}}
        )
        turn.append({"role": "assistant", "content": reply})
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": use_id}
        if draw(st.booleans()):
            result["content"] = [{"type": "text", "text": draw(words)},
                                 {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}]  # fmt: skip
        else:
            result["content"] = draw(words)
        if draw(st.booleans()):
            result["is_error"] = True
        turn.append({"role": "user", "content": [result]})
        turn.append({"role": "assistant", "content": [{"type": "text", "text": draw(words)}]})
    else:
        turn.append({"role": "assistant", "content": reply})
    return turn


@st.composite
def gemini(draw: st.DrawFn) -> list[dict]:
    parts: list[dict] = [{"text": draw(words)}]
    for kind in draw(st.lists(st.sampled_from(["image", "pdf", "file_uri"]), max_size=2)):
        if kind == "image":
            parts.append({"inline_data": {"mime_type": "image/png", "data": URLSAFE}})
        elif kind == "pdf":
            parts.append({"inline_data": {"mime_type": "application/pdf", "data": PDF,
                                          "display_name": draw(words)}})  # fmt: skip
        else:
            parts.append({"file_data": {"mime_type": "application/pdf",
                                        "file_uri": "https://generativelanguage.googleapis.com/v1beta/files/" + draw(ids)}})  # fmt: skip
    turn: list[dict] = [{"role": "user", "parts": parts}]
    reply: list[dict] = []
    if draw(st.booleans()):
        reply.append({"text": draw(words), "thought": True})
    if draw(st.booleans()):
        calls = draw(st.integers(1, 2))
        for n in range(calls):
            call: dict[str, Any] = {"name": "lookup", "args": {"q": draw(words), "n": n + 1}}
            if draw(st.booleans()):
                call["id"] = "fc_" + draw(ids)
            part: dict[str, Any] = {"function_call": call}
            if n == 0 and draw(st.booleans()):
                part["thought_signature"] = draw(ids)
            reply.append(part)
        turn.append({"role": "model", "parts": reply})
        turn.append({"role": "user", "parts": [
            {"function_response": {"name": "lookup", "response": {"answer": draw(words)}}}
            for _ in range(calls)]})  # fmt: skip
    else:
        reply.append({"text": draw(words)})
        turn.append({"role": "model", "parts": reply})
    if draw(st.booleans()):
        turn.append({"role": "model", "parts": [{"executable_code": {"language": "PYTHON", "code": "print(" + draw(ids) + ")"}},
                                                {"code_execution_result": {"outcome": "OUTCOME_OK", "output": draw(ids)}}]})  # fmt: skip
    turn.append({"role": "model", "parts": [{"text": draw(words)}]})
    return turn


CONVERSATIONS = {
    "openai-chat": chat(), "openai-responses": responses(), "anthropic": anthropic(),
    "gemini": gemini(),
}  # fmt: skip


# ---- the oracle ---------------------------------------------------------------------------------


def leaves(value: Any, path: str = "", kinds: tuple[str, ...] = ()) -> list[tuple[str, tuple, Any]]:
    """(path, the kinds of part enclosing it, value) of every value the message holds; a
    JSON string or a data URL by what is inside."""
    found: list[tuple[str, tuple, Any]] = []
    if isinstance(value, dict):
        inner = (*kinds, value["type"]) if isinstance(value.get("type"), str) else kinds
        for key, item in value.items():
            if key in ("type", "role") and isinstance(item, str):
                continue
            found += leaves(item, f"{path}.{key}" if path else key, inner)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += leaves(item, f"{path}[{i}]", kinds)
    elif isinstance(value, str) and value.startswith("data:") and ";base64," in value:
        media, data = value[5:].split(";base64,", 1)
        found += [(path, kinds, media), (path, kinds, data)]
    elif isinstance(value, str) and value[:1] == "{":
        found += leaves(json.loads(value), path, kinds)
    elif value is not None and value is not False and value != "":
        found.append((path, kinds, value))
    return found


def carried(value: Any, payload: Any) -> bool:
    """Whether a value occurs in the payload: as a value, or inside a string of it (texts
    joined, arguments serialised)."""
    found = [v for _, _, v in leaves(payload)] + strings(payload)
    if isinstance(value, bool):
        return value in [v for v in found if isinstance(v, bool)]
    text = value if isinstance(value, str) else json.dumps(value)
    return any(isinstance(v, str) and text in v or v == value for v in found)


def strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return [value] if isinstance(value, str) else []


def named(path: str, kinds: tuple, omitted: list[dict]) -> bool:
    """Whether an omission names the value: by its field, by a path it lies under, or by
    the kind of part it is in."""
    key = path.rsplit(".", 1)[-1].split("[", 1)[0]
    for o in omitted:
        whats = o["what"].split(", ")
        if key in o["what"] or o["what"] in kinds:
            return True
        if any(path == w or path.startswith((w + ".", w + "[")) for w in whats):
            return True
    return False


@pytest.fixture(scope="module")
def store():
    with ContextStore.from_url("memory://", Settings(actor="t")) as s:
        yield s


@pytest.mark.parametrize("source", SHAPES)
@settings(max_examples=examples(60), deadline=None)
@given(data=st.data())
def test_every_conversion_carries_each_value_or_names_it(store, source, data):
    turn = data.draw(CONVERSATIONS[source])
    cid = store.create()
    store.insert(cid, turn)
    messages = store.visible(cid).messages
    given_payloads = [m.native if m.native is not None else m.to_openai() for m in messages]
    for target in SHAPES:
        if target == source:
            continue
        done = convert(messages, target)
        for m, payload in zip(messages, given_payloads, strict=True):
            mine = [o for o in done.omitted if o["id"] == m.id]
            for path, kinds, value in leaves(payload):
                assert carried(value, done.payload) or named(path, kinds, mine), (
                    f"{source} -> {target}: {path} = {value!r} of {payload} is neither in "
                    f"{done.payload} nor named in {mine}"
                )
