"""A live tail rides through a store that stops answering: it reads again from its last
event, says so once (and once more when it is over), and gives up only after `idle`."""

from __future__ import annotations

import logging

import pytest
from eventsourcing.persistence import OperationalError

from ctxstore.adapters.store import tail
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.domain.errors import StoreUnavailableError


def test_a_follower_reads_on_after_an_outage_and_says_so_once(monkeypatch, caplog):
    monkeypatch.setattr(tail, "OUTAGE_WAIT", 0.01)
    real = tail.events_after
    failures = iter([True, True, True, False])

    def flaky(*args, **kwargs):
        if next(failures, False):
            raise OperationalError("server closed the connection unexpectedly\nmore lines")
        return real(*args, **kwargs)

    with ContextStore.from_url("memory://") as store:
        cid = store.create(name="followed")
        for n in range(3):
            store.insert(cid, [{"role": "user", "content": f"m{n}"}])
        monkeypatch.setattr(tail, "events_after", flaky)
        with caplog.at_level(logging.WARNING, logger=tail.__name__):
            seen = [e.version for e in store.follow(cid, after=1, idle=0.2)]
    assert seen == [2, 3, 4]
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2 and "does not answer" in said[0] and "answers again" in said[1]
    assert "more lines" not in said[0]  # one line of the driver's message


def test_a_follower_gives_up_after_idle_seconds_of_outage(monkeypatch):
    monkeypatch.setattr(tail, "OUTAGE_WAIT", 0.01)

    def down(*args, **kwargs):
        raise OperationalError("server closed the connection unexpectedly")

    with ContextStore.from_url("memory://") as store:
        cid = store.create(name="followed")
        monkeypatch.setattr(tail, "events_after", down)
        with pytest.raises(StoreUnavailableError):
            list(store.follow(cid, after=1, idle=0.05))
