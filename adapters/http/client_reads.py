"""The HTTP client's reads: prompts, history, batches, diffs, calls, replay, usage,
verification, the audit, erasure records and export, over the transport; the client
(client.py) adds the contexts, commands and streams on top."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from pydantic import TypeAdapter

from ctxstore.adapters.http.schemas import Step
from ctxstore.adapters.http.transport import ServiceTransport
from ctxstore.adapters.store.results import (
    AuditPage,
    BatchFrame,
    Diff,
    Erasure,
    HistoryEntry,
    ModelCall,
    ModelUsage,
    Prompt,
    PromptDiff,
    ReplayStep,
    SearchPage,
    TokenSeries,
    Verification,
    VisibleContext,
)
from ctxstore.adapters.store.shards.merged_audit import MergedAuditPage
from ctxstore.domain.context import JSON
from ctxstore.domain.prompt import Strategy

AUDIT_PAGE: TypeAdapter[AuditPage] = TypeAdapter(MergedAuditPage | AuditPage)
REPLAY_PAGE = 500  # versions a replay request asks for


class ServiceReads(ServiceTransport):
    """The read operations of the service, with the facade's method names."""

    def visible(
        self, context_id: UUID | str, *, at_version: int | None = None,
        at_time: datetime | None = None, inline: bool = False, files: str | None = None,
    ) -> VisibleContext:  # fmt: skip
        at = None if at_time is None else at_time.isoformat()
        return self._get(
            self._ctx(context_id), VisibleContext, at_version=at_version, at_time=at,
            inline="true" if inline else None, files=files,
        )  # fmt: skip

    def build_prompt(
        self,
        context_id: UUID | str,
        budget: int,
        strategy: Strategy | None = None,
        *,
        query: str | None = None,
        resources: Sequence[JSON] = (),
        safety: float | None = None,
        at_version: int | None = None,
    ) -> Prompt:
        body = {
            "budget": budget, "strategy": strategy, "query": query,
            "resources": list(resources), "safety": safety, "at_version": at_version,
        }  # fmt: skip
        return self._post(f"{self._ctx(context_id)}/prompt", body, Prompt)

    def history(
        self,
        context_id: UUID | str,
        *,
        types: Sequence[str] | None = None,
        actor: str | None = None,
        from_version: int | None = None,
        to_version: int | None = None,
        changes: bool = False,
    ) -> list[HistoryEntry]:
        return self._get_list(
            f"{self._ctx(context_id)}/history", HistoryEntry,
            types=None if types is None else list(types), actor=actor,
            from_version=from_version, to_version=to_version, changes=changes,
        )  # fmt: skip

    def batches(self, context_id: UUID | str) -> list[BatchFrame]:
        return self._get_list(f"{self._ctx(context_id)}/batches", BatchFrame)

    def diff(self, context_id: UUID | str, from_version: int, to_version: int) -> Diff:
        return self._get(
            f"{self._ctx(context_id)}/diff", Diff,
            from_version=from_version, to_version=to_version,
        )  # fmt: skip

    def calls(self, context_id: UUID | str) -> list[ModelCall]:
        return self._get_list(f"{self._ctx(context_id)}/calls", ModelCall)

    def verify(self, context_id: UUID | str) -> Verification:
        return self._get(f"{self._ctx(context_id)}/verify", Verification)

    def audit(
        self,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        types: Sequence[str] | None = None,
        actor: str | None = None,
        context_id: UUID | str | None = None,
        after: int | str = 0,
        limit: int = 100,
        from_version: int | None = None,
        to_version: int | None = None,
    ) -> AuditPage:
        """A page of the audit; from a service over shards, a merged page (its cursor is
        text: pass it back as `after`)."""
        params = {
            "since": None if since is None else since.isoformat(),
            "until": None if until is None else until.isoformat(),
            "types": None if types is None else list(types), "actor": actor,
            "context_id": None if context_id is None else str(context_id),
            "after": after, "limit": limit, "from_version": from_version, "to_version": to_version,
        }  # fmt: skip
        return AUDIT_PAGE.validate_python(self._send("GET", "/v1/audit", params=params).json())

    def search(
        self, query: str, *, context_ids: Sequence[UUID | str] | None = None,
        roles: Sequence[str] | None = None, since: datetime | None = None,
        until: datetime | None = None, include_hidden: bool = False, limit: int = 20,
        cursor: str | None = None,
    ) -> SearchPage:  # fmt: skip
        """Messages across the token's contexts matching `query` (see the store's)."""
        if isinstance(context_ids, str | UUID):
            context_ids = [context_ids]
        if isinstance(roles, str):
            roles = [roles]
        params = {
            "q": query, "context_id": None if context_ids is None else [str(c) for c in context_ids],
            "role": None if roles is None else list(roles),
            "since": None if since is None else since.isoformat(),
            "until": None if until is None else until.isoformat(),
            "include_hidden": include_hidden, "limit": limit, "cursor": cursor,
        }  # fmt: skip
        return self._get("/v1/search", SearchPage, **params)

    def token_series(self, context_id: UUID | str, *, points: int = 500) -> TokenSeries:
        return self._get(f"{self._ctx(context_id)}/tokens", TokenSeries, points=points)

    def call(self, context_id: UUID | str, number: int) -> ModelCall:
        return self._get(f"{self._ctx(context_id)}/calls/{number}", ModelCall)

    def call_diff(self, context_id: UUID | str, number: int) -> PromptDiff:
        return self._get(f"{self._ctx(context_id)}/calls/{number}/diff", PromptDiff)

    def replay(
        self, context_id: UUID | str, *, from_version: int = 1, to_version: int | None = None
    ) -> Iterator[ReplayStep]:
        """Steps fetched a page (REPLAY_PAGE versions) at a time, as they are consumed."""
        start = from_version
        while to_version is None or start <= to_version:
            end = start + REPLAY_PAGE - 1 if to_version is None else min(
                to_version, start + REPLAY_PAGE - 1
            )  # fmt: skip
            if to_version is None:
                end = min(end, self.visible(context_id).version)
                if end < start:
                    return
            steps = self._get_list(
                f"{self._ctx(context_id)}/replay", Step, from_version=start, to_version=end
            )
            for s in steps:
                yield ReplayStep(s.event, s.visible, s.calls)
            start = end + 1

    def usage_report(
        self, *, model: str | None = None, context_id: UUID | str | None = None
    ) -> list[ModelUsage]:
        cid = None if context_id is None else str(context_id)
        return self._get_list("/v1/usage", ModelUsage, model=model, context_id=cid)

    def erasures(self) -> list[Erasure]:
        return self._get_list("/v1/erasures", Erasure)

    def export_events(self, context_id: UUID | str) -> Iterator[str]:
        response = self._send("GET", f"{self._ctx(context_id)}/export")
        return iter(response.text.splitlines())

    def health(self) -> dict[str, Any]:
        result: dict[str, Any] = self._send("GET", "/health").json()
        return result
