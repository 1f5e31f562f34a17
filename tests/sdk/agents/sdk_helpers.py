"""The helper the OpenAI Agents SDK's own memory tests import from its test suite
(`tests/test_responses.py` in the openai-agents 0.24.0 sdist, MIT License, Copyright (c)
2025 OpenAI), vendored so that those test files run here unchanged but for imports."""

from __future__ import annotations

from typing import Any

from openai.types.responses import ResponseOutputMessage, ResponseOutputText

from ctxstore.adapters.integrations.agents_session import CtxStoreSession
from ctxstore.adapters.store.async_store import AsyncContextStore
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.adapters.store.parts import parts_of


def get_text_message(content: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id="1",
        type="message",
        role="assistant",
        content=[ResponseOutputText(text=content, type="output_text", annotations=[], logprobs=[])],
        status="completed",
    )


# Where the sessions the tests make are stored (conftest.py sets it per test): url None, a
# SQLite file at the db_path; mode "async", through the async store.
BACKEND: dict[str, str | None] = {"url": None, "mode": "sync"}


class SQLiteSession(CtxStoreSession):
    """What the SDK's tests construct, as a CtxStoreSession on the backend in use."""

    def __init__(
        self, session_id: str, db_path: Any = ":memory:", sessions_table: str = "",
        messages_table: str = "", session_settings: Any = None,
    ) -> None:  # fmt: skip
        url = BACKEND["url"]
        if url is None:
            url = "memory://" if str(db_path) == ":memory:" else f"sqlite:///{db_path}"
        self._own_store = ContextStore.from_url(url)
        store: Any = self._own_store
        self._events: Any = None
        self._service: Any = None
        if BACKEND["mode"] == "async":
            self._events = parts_of(self._own_store).storage.async_events()
            store = AsyncContextStore(self._own_store, self._events)
        elif BACKEND["mode"] == "http":  # a tenant's client of a service over the store
            from ctxstore.adapters.http.client import CtxStoreClient
            from tests.conftest import served

            self._service = served(self._own_store)
            store = CtxStoreClient(self._service.__enter__(), token="token-acme")
        super().__init__(session_id, store, session_settings=session_settings)

    def close(self) -> None:
        if self._events is not None:
            self._events.discard()
        if self._service is not None:
            self.store.close()
            self._service.__exit__(None, None, None)
            self._service = None
        self._own_store.close()
