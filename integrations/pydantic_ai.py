"""The Pydantic AI conversation store (`pip install './ctxstore[pydantic-ai]'`)."""

from ctxstore.adapters.integrations.pydantic_ai_store import CtxStoreConversationStore

__all__ = ["CtxStoreConversationStore"]
