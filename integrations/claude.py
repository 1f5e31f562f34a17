"""The Claude Agent SDK session store (`pip install './ctxstore[claude]'`)."""

from ctxstore.adapters.integrations.claude_session_store import CtxStoreSessionStore

__all__ = ["CtxStoreSessionStore"]
