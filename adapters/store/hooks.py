"""What the service, the live tail and the SDK integrations take from a store beyond the
contract: the hooks of the stores that hold events themselves (the in-process store, its
async form and the sharded store), never offered over HTTP or on the command line.

Each is declared with `operation` as the contract's operations are (adapters/store/spec.py),
so the generated faces route and offload them by the same declaration.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol
from uuid import UUID

from ctxstore.adapters.storage.notifications import Wake
from ctxstore.adapters.store.results import Compaction, TailEvent
from ctxstore.adapters.store.spec import Operation, operation, operations_of
from ctxstore.domain.context import JSON

TAIL = "the live tail's own paging (GET .../events serves it)"
HEAD = "the live tail's and the checkpointers' cheap head read"
INTEGRATIONS = "a session's newest items without building the visible context"
COMPACTION = "a threshold's compaction, as an SDK's model loop drives it (compact is the operation)"


class StoreHooks(Protocol):
    """The hooks a store holding events offers its service and integrations."""

    @operation("read", None, None, reason=TAIL)
    def events_after(
        self, context_id: UUID | str, after: int, limit: int = 500
    ) -> list[TailEvent]: ...

    @operation("read", None, None, reason=HEAD)
    def tail_head(self, context_id: UUID | str) -> int: ...

    @operation("read", None, None, reason=HEAD)
    def head_mark(self, context_id: UUID | str) -> tuple[int, int]: ...

    @operation("read", None, None, routed=False, reason="wakes the tail on new events")
    def watch(self, wake: Wake, context_id: UUID | str | None = None) -> Callable[[], None]: ...

    @operation("read", None, None, reason="the service's tenant check on a context")
    def tenant_of(self, context_id: UUID | str) -> str | None: ...

    @operation("read", None, None, on_loop=True, reason=INTEGRATIONS)
    def visible_messages(
        self, context_id: UUID | str, *, last: int | None = None, inline: bool = False
    ) -> list[JSON]: ...

    @operation("command", None, None, reason=COMPACTION)
    def maybe_compact(
        self, context_id: UUID | str, *, actor: str | None = None
    ) -> Compaction | None: ...


HOOKS: Mapping[str, Operation] = operations_of(StoreHooks)

__all__ = ["HOOKS", "StoreHooks"]
