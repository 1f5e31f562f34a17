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
    marker: bool = True


class CompressedConfig(BaseModel):
    """`compressed`: summaries and the most recent messages verbatim."""

    model_config = ConfigDict(extra="forbid")
    recent_messages: int = Field(default=5, ge=0)


class AdaptiveConfig(BaseModel):
    """`adaptive`: recent messages, then important ones, then a topic summary."""

    model_config = ConfigDict(extra="forbid")
    min_recent: int = Field(default=3, ge=0)
    recent_share: float = Field(default=0.6, gt=0, le=1)
    important_share: float = Field(default=0.9, gt=0, le=1)
    keywords: list[str] = Field(default_factory=lambda: list(IMPORTANT_WORDS))
    topic_summary: bool = True
    topic_chars: int = Field(default=60, ge=10)
    max_topics: int = Field(default=20, ge=1)


class SemanticConfig(BaseModel):
    """`semantic`: the most recent messages, then the ones most relevant to the query."""

    model_config = ConfigDict(extra="forbid")
    recent: int = Field(default=3, ge=0)
    threshold: float = Field(default=0.05, ge=0, le=1)


class PromptConfig(BaseModel):
    """How prompts are built; `CTXSTORE_PROMPT__*` variables or `[prompt]` in the config file."""

    model_config = ConfigDict(extra="forbid")
    strategy: Strategy = "full"
    safety: float = Field(default=0.9, gt=0, le=1)
    full: FullConfig = Field(default_factory=FullConfig)
    compressed: CompressedConfig = Field(default_factory=CompressedConfig)
    adaptive: AdaptiveConfig = Field(default_factory=AdaptiveConfig)
    semantic: SemanticConfig = Field(default_factory=SemanticConfig)
