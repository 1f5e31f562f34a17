"""Every error ctxstore raises on purpose; each message names the offending value."""

from typing import Any


class CtxStoreError(Exception):
    """Base of every error ctxstore raises on purpose."""

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return str(self.args[0]) if self.args else self.__class__.__name__


class ContextNotFoundError(CtxStoreError, KeyError):
    """No context has the given id."""


class UnknownMessageError(CtxStoreError, KeyError):
    """A command named a message id (or position) that is not visible."""


class UnknownBatchError(CtxStoreError, ValueError):
    """A command named a batch that is not open."""


class InvalidMessageError(CtxStoreError, ValueError):
    """A message does not have the OpenAI chat shape."""


class MalformedTranscriptError(CtxStoreError, ValueError):
    """The command would leave a tool call separated from its result."""


class InvalidOperationError(CtxStoreError, ValueError):
    """The command's arguments are inconsistent (empty, duplicated, not contiguous)."""


class HistoryRemovedError(InvalidOperationError):
    """The versions asked for were removed by a retention policy (keep_latest): the context
    now starts from a checkpoint."""


class ContextExistsError(InvalidOperationError):
    """A context with the given id already exists (a create or import would overwrite it)."""


class RetentionConfirmationError(InvalidOperationError):
    """A retention policy under which the next sweep would remove history was set without
    being confirmed (`yes`): `plan` says what it would remove, per context."""

    def __init__(self, message: str, plan: Any = None) -> None:
        super().__init__(message)
        self.plan = plan


class LimitExceededError(CtxStoreError, ValueError):
    """A message is larger, or a context would hold more messages, than configured."""


class BlobTooLargeError(LimitExceededError):
    """An attachment is larger than CTXSTORE_MAX_BLOB_BYTES."""


class BlobNotFoundError(CtxStoreError, KeyError):
    """The tenant holds no attachment with that sha256."""


class VersionConflictError(CtxStoreError):
    """The context is not at the version the caller expected, or a racing writer won."""


class PromptDoesNotFitError(CtxStoreError, ValueError):
    """The messages that must always be sent do not fit the budget on their own."""


class ContextMovedError(CtxStoreError):
    """The context was moved to another server (a sharded store reads its placement again)."""


class StoreUnavailableError(CtxStoreError):
    """The database behind the store cannot be reached or opened."""


class IndexBehindError(StoreUnavailableError):
    """An index (the audit's, search's) is behind the store's events and the store can only
    be read: catching it up is a write, and an answer from it would leave out what it lacks.
    Open the store once where it can be written, or copy it somewhere writable."""


class OutcomeUnknownError(StoreUnavailableError):
    """A write reached the database but whether it was committed cannot be told now (the
    store cannot be read). Its events carry `command_id`: once the store answers, the
    context's history says whether they are there (an entry with that `command_id`);
    never retry blindly."""

    def __init__(self, message: str, *, context_id: str = "", command_id: str = "") -> None:
        super().__init__(message)
        self.context_id = context_id
        self.command_id = command_id


class TooManyClientsError(StoreUnavailableError):
    """A service instance already serves as many live tails as it may; retry later."""


class DamagedContextError(CtxStoreError):
    """A context's stored events cannot be read back as a context: one is missing, or its
    type or state is not what was written. Names the context and the version."""


class ConfigurationError(CtxStoreError, ValueError):
    """A setting, the configuration file or a path given to ctxstore is wrong (CLI exit 8)."""


class StoreURLError(ConfigurationError):
    """The store URL names no backend ctxstore knows, or is incomplete."""


class InvalidImportError(InvalidOperationError):
    """An import file is not a well-formed export or transcript; nothing was written."""


class MissingExtraError(ConfigurationError, ImportError):
    """A feature needs an optional extra that is not installed; the message names it."""

    def __init__(self, feature: str, extra: str) -> None:
        super().__init__(
            f"{feature} needs the extra [{extra}]: pip install './ctxstore[{extra}]' "
            "(from the folder holding ctxstore's source)"
        )


class NothingToSummarizeError(CtxStoreError, ValueError):
    """The visible context has nothing a summary could replace (fallback level 3)."""


class ContextOverflowError(CtxStoreError):
    """The summarizer's model could not take this much input."""


def first_line(exc: BaseException) -> str:
    """An error's message in one line (a driver's, libpq's above all, runs over several);
    "" when it says nothing."""
    said = str(exc).strip()
    return said.splitlines()[0] if said else ""
