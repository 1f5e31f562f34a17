"""The merged audit across servers, against a plain model: however the servers' events
interleave in time, whatever the page sizes and whenever new events arrive, paging with the
cursor returns every server's events exactly once, each server's in its own order."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxstore.adapters.store.shards.merged_audit import merged_page, parse_cursor
from ctxstore.projections.audit import AuditEntry, AuditPage

from ..conftest import examples

NAMES = ["a", "b", "c"]
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def entry(position: int, seconds: int) -> AuditEntry:
    return AuditEntry(
        position=position, context_id=uuid.uuid4(), version=1,
        timestamp=EPOCH + timedelta(seconds=seconds), type="insert", actor="t", batch=0,
        reverted=False, reverted_by=None, message_ids=[], details={},
    )  # fmt: skip


def server_reader(streams: dict[str, list[AuditEntry]]):
    """Each server's audit: its entries after a position, in position order."""

    def read(name: str, after: int, limit: int) -> AuditPage:
        found = [e for e in streams[name] if e.position > after][:limit]
        return AuditPage(entries=found, cursor=found[-1].position if found else after,
                         more=len(found) == limit)  # fmt: skip

    return read


# Per server: positions growing with gaps (erasures), times in any order (a later position
# may carry an earlier time); then events that arrive while paging.
stream = st.lists(st.tuples(st.integers(1, 3), st.integers(0, 50)), max_size=25)


@settings(max_examples=examples(200), deadline=None)
@given(
    first=st.fixed_dictionaries({n: stream for n in NAMES}),
    later=st.fixed_dictionaries({n: stream for n in NAMES}),
    limits=st.lists(st.integers(1, 9), min_size=1, max_size=12),
    arrive_after=st.integers(0, 6),
)
def test_paging_sees_every_server_event_once_in_each_server_order(
    first, later, limits, arrive_after
) -> None:
    streams: dict[str, list[AuditEntry]] = {}
    for name in NAMES:
        position, made = 0, []
        for step, seconds in first[name]:
            position += step
            made.append(entry(position, seconds))
        streams[name] = made
    read = server_reader(streams)
    seen: dict[str, list[int]] = {n: [] for n in NAMES}
    after: str | int = ""
    pages = 0
    while True:
        limit = limits[pages % len(limits)]
        page = merged_page(read, NAMES, after, limit)
        pages += 1
        assert len(page.entries) <= limit
        for e, name in zip(page.entries, page.shards, strict=True):
            seen[name].append(e.position)
        after = page.cursor
        if pages == arrive_after:  # new events on every server, after what is there
            for name in NAMES:
                position = streams[name][-1].position if streams[name] else 0
                for step, seconds in later[name]:
                    position += step
                    streams[name].append(entry(position, seconds))
        if not page.entries and pages > arrive_after:
            break
    for name in NAMES:
        assert seen[name] == [e.position for e in streams[name]]
    positions = parse_cursor(after, NAMES)
    assert positions == {n: (streams[n][-1].position if streams[n] else 0) for n in NAMES}
