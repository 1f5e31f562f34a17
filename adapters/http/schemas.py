"""Request bodies of the HTTP API. Unknown fields are refused; messages are checked by the store,
so an invalid message is named as precisely as in-process."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

from ctxstore.adapters.store.results import HistoryEntry, VisibleContext
from ctxstore.domain.captured import CapturedCall
from ctxstore.domain.limits import MAX_LATENCY
from ctxstore.domain.shapes import FORMATS

# Every integer is bounded as the query parameters are: within a database's bigint.
LIMIT = 2**62
Position = Annotated[int, Field(ge=-LIMIT, le=LIMIT)]
Count = Annotated[int, Field(ge=0, le=LIMIT)]
# A message id, or its position among the visible messages (negative counts from the end).
Ref = str | Position
Version = Annotated[int, Field(ge=-LIMIT, le=LIMIT)] | None
MessageJSON = dict[str, Any]


Latency = Annotated[
    float | None,
    Field(ge=0, le=MAX_LATENCY, allow_inf_nan=False, description="the call's seconds, as measured"),
]


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Command(Body):
    expected_version: Version = Field(
        default=None,
        description="fail with 409 unless the context is at this version (or use If-Match)",
    )


class CreateBody(Body):
    name: str | None = None
    metadata: dict[str, Any] | None = None
    encoding: str | None = Field(default=None, description="token encoding, e.g. o200k_base")
    model: str | None = Field(
        default=None,
        max_length=200,
        description="the model it is for: chooses the encoding (gpt-4o, gpt-5, o3: o200k_base)",
    )
    context_id: UUID | None = Field(
        default=None,
        description="choose the id (409 if you took it before); with tokens it is scoped to "
        "your tenant: the context's id is derived from it and your tenant",
    )


class KeyBody(Body):
    key: str = Field(min_length=1, max_length=500, description="your own id: a session id")
    name: str | None = None
    metadata: dict[str, Any] | None = None


class Found(BaseModel):
    """The context a key names, or null when none was created."""

    context_id: UUID | None


class Created(BaseModel):
    context_id: UUID
    version: int


# A message shape's name: the registry's (an enum of them in the OpenAPI document).
if TYPE_CHECKING:
    Shape = str
    ShapedAs = str
else:
    Shape = Literal[FORMATS]
    ShapedAs = Literal[("stored", *FORMATS)]  # "stored": each message as it came


class InsertBody(Command):
    messages: list[MessageJSON] = Field(
        description="messages in their own shape: chat messages, Responses items, Anthropic "
        "messages or Gemini Contents (detected, or named by format)"
    )
    after: Ref | None = Field(default=None, description="insert after this message; default: end")
    format: Shape | None = Field(
        default=None, description="the messages' shape; default: detected for each"
    )
    calls: list[CapturedCall] | None = Field(
        default=None,
        description="model calls whose replies these messages are, recorded in the same write",
    )


DeltaJSON = dict[str, Any]
DELTAS_SAID = (
    "deltas: neutral ({text}, {reasoning}, {call}, ...) or a provider's stream events (Chat "
    "Completions chunks, Responses or Anthropic stream events)"
)
DELTAS = Field(default=None, max_length=10_000, description=DELTAS_SAID)


class BeginBody(Command):
    message: MessageJSON | None = Field(
        default=None, description="how the reply starts; default: an empty assistant message"
    )
    after: Ref | None = Field(default=None, description="place it after this message")
    format: Shape | None = Field(default=None, description="its shape; default: detected")


class AppendBody(Command):
    id: Ref = Field(description="the streaming reply")
    deltas: list[DeltaJSON] = Field(max_length=10_000, description=DELTAS_SAID)


class FinishBody(Command):
    id: Ref = Field(description="the streaming reply")
    message: MessageJSON | None = Field(
        default=None, description="the reply as the SDK finished it; default: as it streamed"
    )
    deltas: list[DeltaJSON] | None = DELTAS


class AbandonBody(Command):
    id: Ref = Field(description="the streaming reply")
    reason: str | None = Field(default=None, max_length=1000)
    keep: bool = Field(default=True, description="keep what arrived (marked), or hide it")
    deltas: list[DeltaJSON] | None = DELTAS


class DeleteBody(Command):
    ids: list[Ref]


class ReplaceBody(Command):
    id: Ref
    message: MessageJSON | str = Field(description="a message, or new text for the same message")


class CompressBody(Command):
    ids: list[Ref] = Field(description="a contiguous run of visible messages")
    summary: MessageJSON | str
    stats: dict[str, Any] | None = None


class ExpandBody(Command):
    summary_id: Ref = Field(description="the visible summary to put its messages back for")


class BatchEndBody(Command):
    to: Count | None = Field(default=None, description="close the batches above this one")
    keep: bool = Field(default=False, description="keep the changes instead of rolling back")


class ResponseBody(Body):
    response: dict[str, Any] = Field(
        description="an OpenAI ChatCompletion, a Responses Response or an Anthropic Message"
    )
    request: dict[str, Any] | None = Field(
        default=None, description="the request that was sent (its messages or input, system)"
    )
    latency: Latency = None


class UsageBody(Body):
    model: str
    prompt_tokens: Count
    completion_tokens: Count = 0
    version: Version = None
    counted_tokens: Count | None = None
    sent: list[str | MessageJSON] | None = Field(
        default=None, description="ids of visible messages, or messages, as sent"
    )
    latency: Latency = None


class ForkBody(Body):
    at_version: Version = None
    name: str | None = None
    metadata: dict[str, Any] | None = None


class RecoverBody(Body):
    """What a prompt is built with (after an overflow: of the head, once compacted)."""

    budget: int = Field(gt=0, le=LIMIT, description="the model's context window, in tokens")
    strategy: Literal["full", "compressed", "adaptive", "semantic"] | None = None
    query: str | None = None
    resources: list[dict[str, Any]] = []
    safety: float | None = None


class PromptBody(RecoverBody):
    at_version: Version = None


class CompactBody(Body):
    trigger: str = "manual"  # recorded in the compaction's stats (the store checks it)
    dry_run: bool = False


class Health(BaseModel):
    status: Literal["ok"]
    backend: str


class ImportBody(Body):
    lines: list[str] = Field(description="an export's JSON lines, in order")
    new_id: bool = Field(default=False, description="store it under a new id")
    without_trailer: bool = Field(
        default=False, description="accept an export without a trailer (written before them)"
    )


class TranscriptBody(Body):
    messages: list[MessageJSON] = Field(description="OpenAI-format chat messages, in order")
    name: str | None = None


class Step(BaseModel):
    """One step of a replay: the event, the visible context after it, the calls that sent it."""

    event: HistoryEntry
    visible: VisibleContext
    calls: list[int]


class Shaped(BaseModel):
    """Messages in one shape, to copy out: `stored` key for key as they came, or converted
    to a provider's request shape (`omitted`: what that shape cannot carry, and why)."""

    shape: str
    payload: Any
    omitted: list[dict[str, Any]] = []
