"""The facade's record of model calls: what a provider billed for one (`record_usage`,
and `usage_report` across contexts), a call as the SDK returned it (`record_response`) and
as the provider received it (`record_call`). A part of ContextStore, which offers its
methods as its own; the work is in usage.py, responses.py and captured.py (imported when
first used: a read command never loads them)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from ctxstore.adapters.store.core import StoreCore
from ctxstore.adapters.store.results import ModelUsage, Prompt, Written
from ctxstore.adapters.store.writer import Writer
from ctxstore.domain.captured import CapturedCall
from ctxstore.domain.context import JSON
from ctxstore.domain.messages import Message


class ModelCallsSurface:
    """What ContextStore offers to record model calls and report their usage."""

    def __init__(self, core: StoreCore, writer: Writer) -> None:
        self._core = core
        self._writer = writer

    def record_usage(
        self, context_id: UUID | str, *, model: str, prompt_tokens: int,
        completion_tokens: int = 0, version: int | None = None,
        counted_tokens: int | None = None, prompt: Prompt | None = None,
        sent: Sequence[str | Message | JSON] | None = None, actor: str | None = None,
        latency: float | None = None,
    ) -> Written:  # fmt: skip
        """Record what a provider billed for a call made with the context at `version`
        (and, with `latency`, how many seconds the call took).

        Give the `prompt` you sent (from build_prompt) or the messages `sent` (ids of visible
        messages, or messages) so that `call()` can show exactly what the model saw; else the
        whole visible context counts as sent. `version` defaults to the prompt's, else the
        head; `counted_tokens` to the prompt's total, else ctxstore's count of the context.
        """
        from ctxstore.adapters.store import usage

        return usage.record(
            self._writer, self._core.id(context_id), model=model, prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens, version=version, counted_tokens=counted_tokens,
            prompt=prompt, sent=sent, actor=self._core.actor(actor), latency=latency,
        )  # fmt: skip

    def record_response(
        self, context_id: UUID | str, response: Any, *, request: Any = None,
        actor: str | None = None, latency: float | None = None,
    ) -> Written:  # fmt: skip
        """Record one model call as the SDK returned it: an OpenAI ChatCompletion, a
        Responses Response or an Anthropic Message (object or dict). Its output is inserted
        in its own shape (the chat message, the Responses output items, the assistant
        message's role and content) and the provider's usage recorded for the version the
        call was made with — one write. With the `request` (its `messages` or `input`, and
        `system`), `call()` shows exactly what the model saw; with `latency`, the call's
        seconds as you measured them."""
        from ctxstore.adapters.store import responses

        return responses.record_response(
            self._writer, self._core.id(context_id), response, request=request,
            actor=self._core.actor(actor), max_message_bytes=self._core.settings.max_message_bytes,
            latency=latency,
        )  # fmt: skip

    def record_call(
        self, context_id: UUID | str, call: CapturedCall | JSON, *, actor: str | None = None
    ) -> Written:
        """Record a model call as its provider received it (a CapturedCall, or its JSON):
        the request body exactly as sent, the reply (or the error of a failed call), its
        usage and timing, against the context version its input came from. Nothing is
        inserted: the SDK's own session or saver writes the messages. A call recorded again
        under the same `call_id` (a retry after a lost reply) is not recorded twice. The
        integrations' capture (ctxstore.capture) calls this off the application's path."""
        from ctxstore.adapters.store import captured

        return captured.record_call(
            self._writer, self._core.id(context_id), call, actor=self._core.actor(actor)
        )

    def usage_report(
        self, *, model: str | None = None, context_id: UUID | str | None = None,
        tenant: str | None = None,
    ) -> list[ModelUsage]:  # fmt: skip
        """Per model: the provider's prompt tokens against ctxstore's counts, across contexts
        (or one context's, or one tenant's)."""
        cid = None if context_id is None else self._core.id(context_id)
        from ctxstore.adapters.store import usage

        return usage.report(self._core, cid, model, tenant)


__all__ = ["ModelCallsSurface"]
