"""ctxstore: an event-sourced store for LLM conversation context."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ctxstore.domain.compaction import NothingToSummarizeError
from ctxstore.domain.errors import (
    ConfigurationError,
    ContextExistsError,
    ContextNotFoundError,
    CtxStoreError,
    DamagedContextError,
    InvalidImportError,
    InvalidMessageError,
    InvalidOperationError,
    LimitExceededError,
    MalformedTranscriptError,
    MissingExtraError,
    PromptDoesNotFitError,
    StoreUnavailableError,
    StoreURLError,
    UnknownBatchError,
    UnknownMessageError,
    VersionConflictError,
)
from ctxstore.domain.messages import Message
from ctxstore.domain.summarize import ContextOverflowError

if TYPE_CHECKING:
    from ctxstore.adapters.store.facade import ContextStore

__all__ = [
    "ConfigurationError",
    "ContextExistsError",
    "ContextNotFoundError",
    "ContextOverflowError",
    "CtxStoreError",
    "DamagedContextError",
    "InvalidImportError",
    "InvalidMessageError",
    "InvalidOperationError",
    "LimitExceededError",
    "MalformedTranscriptError",
    "Message",
    "MissingExtraError",
    "NothingToSummarizeError",
    "PromptDoesNotFitError",
    "StoreURLError",
    "StoreUnavailableError",
    "UnknownBatchError",
    "UnknownMessageError",
    "VersionConflictError",
    "open",
]


def open(url: str | None = None) -> ContextStore:
    """Open a store: `sqlite:///path`, `postgresql://...`, `memory://`; default CTXSTORE_URL,
    else the embedded SQLite file (see README)."""
    from ctxstore.adapters.store.facade import ContextStore

    return ContextStore.from_url(url)
