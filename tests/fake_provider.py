"""A local fake model provider: OpenAI Responses and Chat Completions, Anthropic Messages and
Gemini generateContent, streamed (server-sent events) or not. It records every request body
it receives, so that a test can compare what ctxstore captured with what the provider got.

Replies are scripted: `provider.script(Reply(text="..."), Reply(tool="get_weather",
arguments={"city": "Paris"}))` queues them in order; with none queued, it answers "ok".
`Reply(status=500, text="boom")` answers an error. Usage figures are fixed per reply so that
tests can check them (`prompt_tokens`, `completion_tokens`).
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    text: str = "ok"
    tool: str | None = None  # a function call instead of text
    arguments: dict[str, Any] = field(default_factory=dict)
    status: int = 200
    prompt_tokens: int = 11
    completion_tokens: int = 7


@dataclass
class Received:
    path: str
    body: dict[str, Any]
    headers: dict[str, str]


class FakeProvider:
    """The server and what it received; `url` is its root (http://127.0.0.1:PORT)."""

    def __init__(self) -> None:
        self.received: list[Received] = []
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._count = 0
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(size) if size else b"{}"
                body = json.loads(raw or b"{}")
                provider._handle(self, body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def script(self, *replies: Reply) -> None:
        with self._lock:
            self._replies.extend(replies)

    def bodies(self, path_part: str = "") -> list[dict[str, Any]]:
        """The request bodies received on paths containing `path_part`, in order."""
        return [r.body for r in self.received if path_part in r.path]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # ---- answering ------------------------------------------------------------------

    def _next(self) -> tuple[Reply, int]:
        with self._lock:
            self._count += 1
            return (self._replies.popleft() if self._replies else Reply()), self._count

    def _handle(self, h: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        path = h.path.split("?")[0]
        self.received.append(Received(h.path, body, {k.lower(): v for k, v in h.headers.items()}))
        reply, n = self._next()
        if reply.status != 200:
            return _json(h, reply.status, {"error": {"message": reply.text, "type": "server_error",
                                                     "code": "fake_error"}})  # fmt: skip
        stream = bool(body.get("stream")) or "streamGenerateContent" in path
        if path.endswith("/responses"):
            full = _response(body, reply, n)
            return _sse(h, _response_events(full)) if stream else _json(h, 200, full)
        if path.endswith("/chat/completions"):
            if stream:
                return _sse(h, _chat_chunks(body, reply, n), done=True)
            return _json(h, 200, _chat(body, reply, n))
        if path.endswith("/messages"):
            full = _anthropic(body, reply, n)
            return _sse(h, _anthropic_events(full), named=True) if stream else _json(h, 200, full)
        if ":generateContent" in path or ":streamGenerateContent" in path:
            full = _gemini(reply, path)
            return _sse(h, _gemini_chunks(full)) if stream else _json(h, 200, full)
        return _json(h, 404, {"error": {"message": f"no such path {path}"}})


def _json(h: BaseHTTPRequestHandler, status: int, payload: Any) -> None:
    data = json.dumps(payload).encode()
    h.send_response(status)
    h.send_header("Content-Type", "application/json")
    h.send_header("Content-Length", str(len(data)))
    h.end_headers()
    h.wfile.write(data)


def _sse(
    h: BaseHTTPRequestHandler, events: list[Any], *, done: bool = False, named: bool = False
) -> None:
    lines = []
    for e in events:
        if named:
            lines.append(f"event: {e['type']}\n")
        lines.append(f"data: {json.dumps(e)}\n\n")
    if done:
        lines.append("data: [DONE]\n\n")
    data = "".join(lines).encode()
    h.send_response(200)
    h.send_header("Content-Type", "text/event-stream")
    h.send_header("Content-Length", str(len(data)))
    h.end_headers()
    h.wfile.write(data)


# ---- OpenAI Responses ------------------------------------------------------------------


def _response(body: dict[str, Any], reply: Reply, n: int) -> dict[str, Any]:
    if reply.tool is not None:
        item: dict[str, Any] = {
            "type": "function_call", "id": f"fc_{n}", "call_id": f"call_{n}",
            "name": reply.tool, "arguments": json.dumps(reply.arguments), "status": "completed",
        }  # fmt: skip
    else:
        item = {
            "type": "message", "id": f"msg_{n}", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
        }  # fmt: skip
    return {
        "id": f"resp_{n}", "object": "response", "created_at": 1700000000 + n,
        "status": "completed", "model": body.get("model", "gpt-4o"), "output": [item],
        "parallel_tool_calls": True, "tool_choice": "auto", "tools": body.get("tools", []),
        "usage": {
            "input_tokens": reply.prompt_tokens, "output_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }  # fmt: skip


def _response_events(full: dict[str, Any]) -> list[dict[str, Any]]:
    item = full["output"][0]
    started = {**full, "status": "in_progress", "output": [], "usage": None}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "sequence_number": 0, "response": started},
        {"type": "response.in_progress", "sequence_number": 1, "response": started},
    ]
    seq = 2
    if item["type"] == "message":
        empty = {**item, "status": "in_progress", "content": []}
        text = item["content"][0]["text"]
        part = {"type": "output_text", "text": "", "annotations": []}
        events += [
            {"type": "response.output_item.added", "output_index": 0, "item": empty},
            {"type": "response.content_part.added", "output_index": 0, "content_index": 0,
             "item_id": item["id"], "part": part},
        ]  # fmt: skip
        for chunk in (text[: len(text) // 2], text[len(text) // 2 :]):
            events.append({"type": "response.output_text.delta", "output_index": 0,
                           "content_index": 0, "item_id": item["id"], "delta": chunk,
                           "logprobs": []})  # fmt: skip
        events += [
            {"type": "response.output_text.done", "output_index": 0, "content_index": 0,
             "item_id": item["id"], "text": text, "logprobs": []},
            {"type": "response.content_part.done", "output_index": 0, "content_index": 0,
             "item_id": item["id"], "part": item["content"][0]},
        ]  # fmt: skip
    else:
        events += [
            {"type": "response.output_item.added", "output_index": 0,
             "item": {**item, "arguments": "", "status": "in_progress"}},
            {"type": "response.function_call_arguments.delta", "output_index": 0,
             "item_id": item["id"], "delta": item["arguments"]},
            {"type": "response.function_call_arguments.done", "output_index": 0,
             "item_id": item["id"], "arguments": item["arguments"], "name": item["name"]},
        ]  # fmt: skip
    events += [
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed", "response": full},
    ]
    for e in events[2:]:
        e["sequence_number"] = seq
        seq += 1
    return events


# ---- OpenAI Chat Completions ------------------------------------------------------------


def _chat_message(reply: Reply, n: int) -> dict[str, Any]:
    if reply.tool is not None:
        return {"role": "assistant", "content": None, "tool_calls": [{
            "id": f"call_{n}", "type": "function",
            "function": {"name": reply.tool, "arguments": json.dumps(reply.arguments)},
        }]}  # fmt: skip
    return {"role": "assistant", "content": reply.text}


def _chat(body: dict[str, Any], reply: Reply, n: int) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{n}", "object": "chat.completion", "created": 1700000000 + n,
        "model": body.get("model", "gpt-4o"),
        "choices": [{"index": 0, "message": _chat_message(reply, n), "logprobs": None,
                     "finish_reason": "tool_calls" if reply.tool else "stop"}],
        "usage": {"prompt_tokens": reply.prompt_tokens,
                  "completion_tokens": reply.completion_tokens,
                  "total_tokens": reply.prompt_tokens + reply.completion_tokens},
    }  # fmt: skip


def _chat_chunks(body: dict[str, Any], reply: Reply, n: int) -> list[dict[str, Any]]:
    base = {"id": f"chatcmpl-{n}", "object": "chat.completion.chunk",
            "created": 1700000000 + n, "model": body.get("model", "gpt-4o")}  # fmt: skip
    message = _chat_message(reply, n)
    if reply.tool is not None:
        call = message["tool_calls"][0]
        deltas = [{"role": "assistant", "tool_calls": [{"index": 0, **call}]}]
    else:
        text = reply.text
        deltas = [{"role": "assistant", "content": text[: len(text) // 2]},
                  {"content": text[len(text) // 2 :]}]  # fmt: skip
    chunks = [{**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]}
              for d in deltas]  # fmt: skip
    chunks.append({**base, "choices": [{"index": 0, "delta": {},
                   "finish_reason": "tool_calls" if reply.tool else "stop"}]})  # fmt: skip
    chunks.append({**base, "choices": [], "usage": {
        "prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens,
        "total_tokens": reply.prompt_tokens + reply.completion_tokens}})  # fmt: skip
    return chunks


# ---- Anthropic Messages ------------------------------------------------------------------


def _anthropic(body: dict[str, Any], reply: Reply, n: int) -> dict[str, Any]:
    if reply.tool is not None:
        block: dict[str, Any] = {"type": "tool_use", "id": f"toolu_{n}", "name": reply.tool,
                                 "input": reply.arguments}  # fmt: skip
    else:
        block = {"type": "text", "text": reply.text}
    return {
        "id": f"msg_{n}", "type": "message", "role": "assistant",
        "model": body.get("model", "claude-sonnet-4-5"), "content": [block],
        "stop_reason": "tool_use" if reply.tool else "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": reply.prompt_tokens, "output_tokens": reply.completion_tokens},
    }  # fmt: skip


def _anthropic_events(full: dict[str, Any]) -> list[dict[str, Any]]:
    block = full["content"][0]
    start = {
        **full,
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": full["usage"]["input_tokens"], "output_tokens": 0},
    }
    if block["type"] == "text":
        empty: dict[str, Any] = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": block["text"]}
    else:
        empty = {**block, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
    return [
        {"type": "message_start", "message": start},
        {"type": "content_block_start", "index": 0, "content_block": empty},
        {"type": "content_block_delta", "index": 0, "delta": delta},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": full["stop_reason"],
                                            "stop_sequence": None},
         "usage": {"output_tokens": full["usage"]["output_tokens"]}},
        {"type": "message_stop"},
    ]  # fmt: skip


# ---- Gemini --------------------------------------------------------------------------


def _gemini(reply: Reply, path: str) -> dict[str, Any]:
    model = path.rsplit("/", 1)[-1].split(":")[0]
    if reply.tool is not None:
        part: dict[str, Any] = {"functionCall": {"name": reply.tool, "args": reply.arguments}}
    else:
        part = {"text": reply.text}
    return {
        "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP",
                        "index": 0}],
        "usageMetadata": {"promptTokenCount": reply.prompt_tokens,
                          "candidatesTokenCount": reply.completion_tokens,
                          "totalTokenCount": reply.prompt_tokens + reply.completion_tokens},
        "modelVersion": model,
    }  # fmt: skip


def _gemini_chunks(full: dict[str, Any]) -> list[dict[str, Any]]:
    """A streamed reply as Gemini streams one: text in two chunks, the finish reason and
    usage on the last (a function call whole, in one chunk)."""
    part = full["candidates"][0]["content"]["parts"][0]
    if "text" not in part:
        return [full]
    text = part["text"]
    first = {"candidates": [{"content": {"role": "model", "parts": [{"text": text[: len(text) // 2]}]},
                             "index": 0}], "modelVersion": full["modelVersion"]}  # fmt: skip
    last = {**full, "candidates": [{**full["candidates"][0], "content": {
        "role": "model", "parts": [{"text": text[len(text) // 2 :]}]}}]}  # fmt: skip
    return [first, last]
