"""The shapes' names: a native message's `format` as stored, and a shape as callers name it
(the registry lists them in order)."""

from __future__ import annotations

from ctxstore.domain.gemini import GEMINI

CHAT, RESPONSES, ANTHROPIC = "openai-chat", "openai-responses", "anthropic"

__all__ = ["ANTHROPIC", "CHAT", "GEMINI", "RESPONSES"]
