"""The LangChain chat message history (`pip install './ctxstore[langchain]'`)."""

from ctxstore.adapters.integrations.langchain_history import CtxStoreChatMessageHistory

__all__ = ["CtxStoreChatMessageHistory"]
