"""Google ADK's session and memory services (`pip install './ctxstore[adk]'`)."""

from ctxstore.adapters.integrations.adk_memory_service import CtxStoreMemoryService
from ctxstore.adapters.integrations.adk_session_service import CtxStoreSessionService

__all__ = ["CtxStoreMemoryService", "CtxStoreSessionService"]
