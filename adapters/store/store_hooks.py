"""The hooks of a store in process (adapters/store/hooks.py declares them): what its HTTP
service, its live tail and the SDK integrations take beside the contract, reached as
`store.hooks`, never among the store's own operations."""

from __future__ import annotations

from collections.abc import Callable
from uuid import UUID

from ctxstore.adapters.storage.notifications import Wake
from ctxstore.adapters.store import compaction, reads, tail
from ctxstore.adapters.store.attachments import Attachments
from ctxstore.adapters.store.core import StoreCore
from ctxstore.adapters.store.faults import type_faults
from ctxstore.adapters.store.hooks import StoreHooks
from ctxstore.adapters.store.results import Compaction, TailEvent
from ctxstore.adapters.store.writer import Writer
from ctxstore.domain.context import JSON


@type_faults
class Hooks(StoreHooks):
    """A store's hooks, over the parts the store is built from."""

    def __init__(self, core: StoreCore, writer: Writer, attachments: Attachments) -> None:
        self._core = core
        self._writer = writer
        self._attachments = attachments

    def events_after(
        self, context_id: UUID | str, after: int, limit: int = tail.PAGE
    ) -> list[TailEvent]:
        """One page of the context's stored events after version `after` (what each one
        recorded, as the live tail delivers it)."""
        return tail.events_after(self._core, self._core.id(context_id), after, limit)

    def tail_head(self, context_id: UUID | str) -> int:
        """The context's newest version (where a follower starts by default)."""
        return tail.head_version(self._core, self._core.id(context_id))

    def head_mark(self, context_id: UUID | str) -> tuple[int, int]:
        """The context's newest version and how many times its id had been erased before:
        the pair changes whenever what the id holds may have, so a cache kept by it cannot
        outlive an erasure and a new context made under the same id (a caller's own key
        names the same id again) up to the same version."""
        cid = self._core.id(context_id)
        version = tail.head_version(self._core, cid)  # first: an erasure after it shows
        return version, self._core.storage.erasures_of(cid)

    def watch(self, wake: Wake, context_id: UUID | str | None = None) -> Callable[[], None]:
        """Call `wake(context hex or None)` whenever events are stored (by any process the
        backend can see) until the returned function is called; `wake` must be quick.
        With `context_id`, only that context's events need to wake it."""
        followed = None if context_id is None else self._core.id(context_id).hex
        return self._core.storage.notifications.subscribe(wake, followed)

    def tenant_of(self, context_id: UUID | str) -> str | None:
        """The tenant that owns a context (None: no tenant); raises ContextNotFoundError."""
        return self._core.tenant_of(context_id)

    def visible_messages(
        self, context_id: UUID | str, *, last: int | None = None, inline: bool = False
    ) -> list[JSON]:
        """The visible messages as stored JSON (copies), or only the newest `last`: a
        session's latest items without building the whole visible context."""
        cid = self._core.id(context_id)
        found = reads.visible_messages(self._core, cid, last)
        if not inline:
            return found
        tenant = self._core.tenant_of(cid)
        return [self._attachments.inline_json(tenant, m) for m in found]

    def maybe_compact(
        self, context_id: UUID | str, *, actor: str | None = None
    ) -> Compaction | None:
        """Compact proactively if the visible context crossed a configured threshold."""
        cid = self._core.id(context_id)
        if not compaction.crossed(self._core, *reads.head_size(self._core, cid)):
            return None
        return compaction.compact_proactively(
            self._core, self._writer, cid, self._core.actor(actor)
        )


__all__ = ["Hooks"]
