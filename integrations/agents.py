"""The OpenAI Agents SDK session (`pip install './ctxstore[agents]'`)."""

from ctxstore.adapters.integrations.agents_session import CtxStoreSession

__all__ = ["CtxStoreSession"]
