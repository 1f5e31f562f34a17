"""Short import paths for the agent-framework integrations, one module per SDK:

    from ctxstore.integrations.langgraph import CtxStoreSaver

Each module re-exports its integration from `ctxstore.adapters.integrations` (where the code
lives, and whose paths keep working) and imports only its own SDK; this package imports none.
"""
