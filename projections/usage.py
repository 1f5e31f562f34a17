"""Provider usage against ctxstore's own counts, per model, for calibration."""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict

from ctxstore.domain.context import Context


class ModelUsage(BaseModel):
    """How a provider's prompt tokens compare with ctxstore's count, for one model."""

    model_config = ConfigDict(frozen=True)

    model: str
    calls: int
    prompt_tokens: int  # the provider's sum
    completion_tokens: int
    counted_tokens: int  # ctxstore's sum for the same prompts
    estimated_calls: int  # calls whose count was an estimate
    ratio: float  # provider / ctxstore: multiply ctxstore's counts by this to calibrate
    mean_error: float  # mean of (ctxstore - provider) / provider; negative = under-count


def usage_by_model(events: Iterable[Context.UsageRecorded]) -> list[ModelUsage]:
    """Fold usage events into one line per model, sorted by model name."""
    rows: dict[str, list[Context.UsageRecorded]] = {}
    for e in events:
        if e.call is not None and e.call.get("error") is not None:
            continue  # a failed call was billed nothing the report could weigh
        rows.setdefault(e.model, []).append(e)
    report = []
    for model, calls in sorted(rows.items()):
        provider = sum(c.prompt_tokens for c in calls)
        counted = sum(c.counted_tokens for c in calls)
        errors = [
            (c.counted_tokens - c.prompt_tokens) / c.prompt_tokens for c in calls if c.prompt_tokens
        ]
        report.append(
            ModelUsage(
                model=model,
                calls=len(calls),
                prompt_tokens=provider,
                completion_tokens=sum(c.completion_tokens for c in calls),
                counted_tokens=counted,
                estimated_calls=sum(c.estimated for c in calls),
                ratio=provider / counted if counted else 0.0,
                mean_error=sum(errors) / len(errors) if errors else 0.0,
            )
        )
    return report
