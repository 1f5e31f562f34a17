"""What the `Context` aggregate's command mixins (context_commands.py, context_streams.py)
trigger: each command checks everything, then triggers one event by the library's
`trigger_event` with the event's fields by name; the events, their stored topics naming
`Context`, apply themselves (domain/context.py).

Events are made with the library's `trigger_event` and applied by their class's `apply`,
not through its `@event` decorator: on the hottest paths (every append, every replay of
one) the decorator's matching of arguments to a handler's signature cost more than
applying the event.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ctxstore.domain.context_reads import ContextReads


class ContextTriggers(ContextReads):
    """The aggregate's event classes and trigger, declared for the mixins' type checks."""

    if TYPE_CHECKING:  # the aggregate's (domain/context.py, the library's Aggregate)
        MessagesInserted: type[Any]
        MessagesDeleted: type[Any]
        MessageReplaced: type[Any]
        MessagesCompressed: type[Any]
        SummaryExpanded: type[Any]
        BatchStarted: type[Any]
        BatchEnded: type[Any]
        UsageRecorded: type[Any]
        MessageBegun: type[Any]
        MessageDeltas: type[Any]
        MessageFinished: type[Any]
        MessageAbandoned: type[Any]
        ContextForked: type[Any]

        def trigger_event(self, event_class: type[Any], **kwargs: Any) -> None: ...
