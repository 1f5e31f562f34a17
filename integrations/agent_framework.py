"""Microsoft Agent Framework's history provider (`pip install './ctxstore[agent-framework]'`)."""

from ctxstore.adapters.integrations.agent_framework_history import (
    CtxStoreHistoryProvider,
    chat_messages,
)

__all__ = ["CtxStoreHistoryProvider", "chat_messages"]
