"""Model calls recorded against a context: what was sent, and what the provider billed."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from pydantic import BaseModel, ConfigDict

from ctxstore.domain.context import Context
from ctxstore.domain.messages import Message


class ModelCall(BaseModel):
    """A model call recorded against a context: what was sent, and what the provider billed."""

    model_config = ConfigDict(frozen=True)

    number: int  # 1 for the context's first recorded call
    context_id: UUID
    version: int  # of the usage event
    for_version: int  # the context version the messages came from
    timestamp: datetime
    actor: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    counted_tokens: int
    estimated: bool
    whole_context: bool  # the whole visible context was sent (no built prompt recorded)
    messages: list[Message] | None = None  # exactly what was sent, where asked for


def model_call(n: int, e: Context.UsageRecorded, messages: list[Message] | None) -> ModelCall:
    """Call number `n` of a context from its usage event (with the messages sent, if given)."""
    return ModelCall(
        number=n,
        context_id=e.originator_id,
        version=e.originator_version,
        for_version=e.for_version,
        timestamp=e.timestamp,
        actor=e.actor,
        model=e.model,
        prompt_tokens=e.prompt_tokens,
        completion_tokens=e.completion_tokens,
        counted_tokens=e.counted_tokens,
        estimated=e.estimated,
        whole_context=e.sent is None,
        messages=messages,
    )
