"""The SDK integrations hand back exactly what they were given when it holds attachments:
the store keeps them once by reference, the SDK sees its data."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import pytest

pytest.importorskip("agents")
pytest.importorskip("claude_agent_sdk")

from langchain_core.messages import HumanMessage

from ctxstore.adapters.integrations.agents_session import CtxStoreSession
from ctxstore.adapters.integrations.claude_session_store import CtxStoreSessionStore
from ctxstore.adapters.integrations.langchain_history import CtxStoreChatMessageHistory
from ctxstore.adapters.store.facade import ContextStore

from ..integration.test_attachments import IMAGE

B64 = base64.b64encode(IMAGE).decode()


def test_sessions_read_back_their_attachments(durable_url: str) -> None:
    with ContextStore.from_url(durable_url) as store:
        item: Any = {"role": "user", "content": [
            {"type": "input_image", "image_url": f"data:image/png;base64,{B64}", "detail": "auto"}]}  # fmt: skip
        session = CtxStoreSession("s-img", store)
        asyncio.run(session.add_items([item, item]))
        assert asyncio.run(session.get_items()) == [item, item]
        assert asyncio.run(session.get_items(limit=1)) == [item]

        entry = {"type": "user", "uuid": "u1", "message": {"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": B64}}]}}  # fmt: skip
        claude = CtxStoreSessionStore(store)
        key = {"project_key": "p", "session_id": "s"}
        asyncio.run(claude.append(key, [entry]))
        assert asyncio.run(claude.load(key)) == [entry]

        history = CtxStoreChatMessageHistory("t-img", store)
        said = HumanMessage(content=[{"type": "image_url", "image_url": {
            "url": f"data:image/png;base64,{B64}"}}])  # fmt: skip
        history.add_messages([said])
        assert history.messages[0].content == said.content
        assert store._storage.blobs.stored_bytes() == len(IMAGE)  # once, for all three
