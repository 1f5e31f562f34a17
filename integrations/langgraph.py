"""The LangGraph checkpointer (`pip install './ctxstore[langgraph]'`)."""

from ctxstore.adapters.integrations.langgraph_saver import CtxStoreSaver, thread_context

__all__ = ["CtxStoreSaver", "thread_context"]
