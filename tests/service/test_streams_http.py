"""Streamed replies over HTTP: the routes, the client's batching handle, tenants."""

from __future__ import annotations

import pytest

from ctxstore.adapters.store.reply_stream import StreamPolicy
from ctxstore.domain.streaming import INCOMPLETE


def test_the_http_surface_streams_in_every_shape(service):
    client = service.client()
    c = client.create(name="s")
    client.insert(c, {"role": "user", "content": "q"}, format="anthropic")
    with client.stream(c, format="anthropic", policy=StreamPolicy(interval=0)) as reply:
        reply.add({"type": "content_block_start", "index": 0,
                   "content_block": {"type": "text", "text": ""}})  # fmt: skip
        for word in ("Hello", " from", " HTTP"):
            reply.add({"type": "content_block_delta", "index": 0,
                       "delta": {"type": "text_delta", "text": word}})  # fmt: skip
        assert client.visible(c).messages[-1].metadata[INCOMPLETE]["state"] == "streaming"
    v = client.visible(c)
    assert v.messages[-1].native == {"role": "assistant",
                                     "content": [{"type": "text", "text": "Hello from HTTP"}]}  # fmt: skip
    assert [h.type for h in client.history(c)][-2:] == ["append", "finish"]
    other = service.client("token-globex")
    with pytest.raises(Exception, match="404|not found|no context"):
        other.append(c, v.messages[-1].id, [{"text": "x"}])
    item = client.begin(c, {"type": "message", "role": "assistant", "content": []})
    client.abandon(c, item.ids[0], reason="client went away", deltas=[{"text": "par"}])
    assert client.visible(c).to_responses()[-1]["status"] == "incomplete"
