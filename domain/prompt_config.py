"""How prompts are built: the strategy, the safety margin and each strategy's settings
(`CTXSTORE_PROMPT__*` variables or `[prompt]` in the config file)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Strategy = Literal["full", "compressed", "adaptive", "semantic"]

# importance keywords, English and Chinese
IMPORTANT_WORDS = [
    "decision", "important", "error", "problem", "solution", "must", "never", "always",
    "决定", "重要", "错误", "问题", "解决",
]  # fmt: skip


class FullConfig(BaseModel):
    """`full`: everything; oldest turns dropped first, with a marker saying so."""

    model_config = ConfigDict(extra="forbid")
    marker: bool = True  # say, in one system message, how many turns were left out


class CompressedConfig(BaseModel):
    """`compressed`: summaries and the most recent messages verbatim."""

    model_config = ConfigDict(extra="forbid")
    recent_messages: int = Field(default=5, ge=0)  # the newest messages kept verbatim


class AdaptiveConfig(BaseModel):
    """`adaptive`: recent messages, then important ones, then a topic summary."""

    model_config = ConfigDict(extra="forbid")
    min_recent: int = Field(default=3, ge=0)  # recent messages kept even past their share
    recent_share: float = Field(default=0.6, gt=0, le=1)  # of the limit, for recent messages
    # Of the limit, what recent and important messages may fill together.
    important_share: float = Field(default=0.9, gt=0, le=1)
    # A message that mentions one of these (any case) is important.
    keywords: list[str] = Field(default_factory=lambda: list(IMPORTANT_WORDS))
    topic_summary: bool = True  # name the left-out user topics in one system message
    topic_chars: int = Field(default=60, ge=10)  # of each topic named
    max_topics: int = Field(default=20, ge=1)  # topics named at most


class SemanticConfig(BaseModel):
    """`semantic`: the most recent messages, then the ones most relevant to the query."""

    model_config = ConfigDict(extra="forbid")
    recent: int = Field(default=3, ge=0)  # the newest messages kept whatever their relevance
    threshold: float = Field(default=0.05, ge=0, le=1)  # least relevance to the query kept


class PromptConfig(BaseModel):
    """How prompts are built; `CTXSTORE_PROMPT__*` variables or `[prompt]` in the config file."""

    model_config = ConfigDict(extra="forbid")
    strategy: Strategy = "full"  # full, compressed, adaptive or semantic
    # A prompt never exceeds floor(budget x safety) tokens (room for counting error).
    safety: float = Field(default=0.9, gt=0, le=1)
    full: FullConfig = Field(default_factory=FullConfig)
    compressed: CompressedConfig = Field(default_factory=CompressedConfig)
    adaptive: AdaptiveConfig = Field(default_factory=AdaptiveConfig)
    semantic: SemanticConfig = Field(default_factory=SemanticConfig)
