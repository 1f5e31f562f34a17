"""The LlamaIndex chat store (`pip install './ctxstore[llamaindex]'`)."""

from ctxstore.adapters.integrations.llamaindex_chat_store import CtxStoreChatStore

__all__ = ["CtxStoreChatStore"]
