"""ctxstore: an event-sourced store for LLM conversation context."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ctxstore.domain.errors import (
    BlobTooLargeError,
    ConfigurationError,
    ContextExistsError,
    ContextNotFoundError,
    ContextOverflowError,
    CtxStoreError,
    DamagedContextError,
    HistoryRemovedError,
    IndexBehindError,
    InvalidImportError,
    InvalidMessageError,
    InvalidOperationError,
    LimitExceededError,
    MalformedTranscriptError,
    MissingExtraError,
    NothingToSummarizeError,
    OutcomeUnknownError,
    PromptDoesNotFitError,
    RetentionConfirmationError,
    StoreUnavailableError,
    StoreURLError,
    UnknownBatchError,
    UnknownMessageError,
    VersionConflictError,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ctxstore.adapters.http.client import CtxStoreClient
    from ctxstore.adapters.store.async_store import AsyncContextStore
    from ctxstore.adapters.store.facade import ContextStore
    from ctxstore.adapters.store.shards.store import ShardedStore
    from ctxstore.domain.messages import Message

__all__ = [
    "BlobTooLargeError",
    "ConfigurationError",
    "ContextExistsError",
    "ContextNotFoundError",
    "ContextOverflowError",
    "CtxStoreClient",
    "CtxStoreError",
    "DamagedContextError",
    "HistoryRemovedError",
    "IndexBehindError",
    "InvalidImportError",
    "InvalidMessageError",
    "InvalidOperationError",
    "LimitExceededError",
    "MalformedTranscriptError",
    "Message",
    "MissingExtraError",
    "NothingToSummarizeError",
    "OutcomeUnknownError",
    "PromptDoesNotFitError",
    "RetentionConfirmationError",
    "StoreURLError",
    "StoreUnavailableError",
    "UnknownBatchError",
    "UnknownMessageError",
    "VersionConflictError",
    "aopen",
    "open",
    "open_sharded",
]


def open(url: str | None = None, *, replicas: Sequence[str] | None = None) -> ContextStore:
    """Open a store: `sqlite:///path`, `postgresql://...`, `memory://`; default CTXSTORE_URL,
    else the embedded SQLite file (see README). `replicas`: PostgreSQL streaming replicas
    that reads which only look go to (else the URL's `replica=host:port`, else
    CTXSTORE_REPLICAS); the client still reads its own writes (docs/how-to/scaling.md)."""
    from ctxstore.adapters.store.facade import ContextStore

    return ContextStore.from_url(url, replicas=replicas)


def open_sharded(urls: Sequence[str] | None = None) -> ShardedStore:
    """Open a store over several PostgreSQL servers (default CTXSTORE_SHARDS): each
    context lives on one, placed by rendezvous hashing and recorded on the first server;
    `move` changes a context's server while the others go on (docs/how-to/scaling.md)."""
    from ctxstore.adapters.settings import load_settings
    from ctxstore.adapters.store.shards.store import ShardedStore

    settings = load_settings()
    chosen = list(urls if urls is not None else settings.shards)
    if not chosen:
        raise ConfigurationError("no servers to spread contexts over: give URLs or CTXSTORE_SHARDS")
    return ShardedStore.from_urls(chosen, settings)


def __getattr__(name: str) -> Any:
    # Loaded on first use: `import ctxstore` (and the command line's start) stays light.
    if name == "Message":
        from ctxstore.domain.messages import Message

        return Message
    if name == "ContextStore":
        from ctxstore.adapters.store.facade import ContextStore

        return ContextStore
    if name == "CtxStoreClient":  # the HTTP service's typed client
        from ctxstore.adapters.http.client import CtxStoreClient

        return CtxStoreClient
    if name == "__version__":  # (reading the installed metadata takes ~30 ms)
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("ctxstore")
        except PackageNotFoundError:  # run from a checkout that was never installed
            return "0+unknown"
    raise AttributeError(f"module 'ctxstore' has no attribute {name!r}")


async def aopen(url: str | None = None) -> AsyncContextStore:
    """Open a store for asyncio callers: the same operations, awaited; commands and head
    reads run on the event loop without blocking it (adapters/store/async_store.py)."""
    from ctxstore.adapters.store.async_store import AsyncContextStore

    return await AsyncContextStore.open(url)
