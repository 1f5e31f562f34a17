"""The facade's compaction half: summarize older rounds on demand (`compact`), and after a
model refused an overflowing prompt (`recover_from_overflow`). A part of ContextStore, which
offers its methods as its own; the work is in adapters/store/compaction.py (a threshold's
compaction: store.hooks)."""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from ctxstore.adapters.store import compaction
from ctxstore.adapters.store.core import StoreCore
from ctxstore.adapters.store.results import Compaction, Prompt
from ctxstore.adapters.store.writer import Writer
from ctxstore.domain.context import JSON
from ctxstore.domain.errors import InvalidOperationError
from ctxstore.domain.packing import Resource
from ctxstore.domain.prompt import Strategy
from ctxstore.domain.summarize import Summarizer

MAX_TRIGGER = 64  # what a compaction's trigger may be called


class CompactionSurface:
    """What ContextStore offers to keep a context inside a model's window (see the module)."""

    def __init__(self, core: StoreCore, writer: Writer) -> None:
        self._core = core
        self._writer = writer

    def compact(
        self, context_id: UUID | str, *, trigger: str = "manual", dry_run: bool = False,
        summarizer: Summarizer | None = None, actor: str | None = None,
    ) -> Compaction:  # fmt: skip
        """Summarize the older half of the rounds since the latest summary (half window,
        bisecting summarizer). Writes one compress event in the current batch (it opens
        and closes none: a rollback of an enclosing batch undoes it, expand() undoes it
        alone); a failed summarization writes nothing. Raises
        NothingToSummarizeError, and what the summarizer raises that is not an overflow."""
        who = self._core.actor(actor)
        if not isinstance(trigger, str) or not 0 < len(trigger) <= MAX_TRIGGER:
            raise InvalidOperationError(
                f"trigger must be a name of 1-{MAX_TRIGGER} characters, got {trigger!r:.80}"
            )
        return compaction.compact(
            self._core, self._writer, self._core.id(context_id), trigger=trigger,
            dry_run=dry_run, summarizer=summarizer, actor=who,
        )  # fmt: skip

    def recover_from_overflow(
        self, context_id: UUID | str, budget: int, strategy: Strategy | None = None, *,
        query: str | None = None, resources: Sequence[Resource | JSON] = (),
        safety: float | None = None, actor: str | None = None,
    ) -> Prompt:  # fmt: skip
        """After a model request failed with a context overflow: compact, then the prompt to
        retry with (trigger overflow_retry), which always fits. Raises PromptDoesNotFitError
        when even the messages that must be sent do not fit."""
        return compaction.recover(
            self._core, self._writer, self._core.id(context_id), budget, strategy,
            self._core.actor(actor), {"query": query, "resources": resources, "safety": safety},
        )  # fmt: skip
