"""The PostgreSQL listener during an outage: one line when it starts (libpq's message runs
over several), not one per retry; retried until the server answers."""

from __future__ import annotations

import logging
import socket
import time

from ctxstore.adapters.storage.notifications import PostgresNotifications


def test_an_outage_is_said_once_in_one_line(caplog):
    with socket.socket() as s:  # a port nothing listens on: every connect is refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    listener = PostgresNotifications(
        f"host=127.0.0.1 port={port} dbname=x user=x connect_timeout=1", "ctxstore_events:x", "t"
    )
    with caplog.at_level(logging.WARNING, logger="ctxstore.adapters.storage.notifications"):
        listener.subscribe(lambda _: None)  # the first subscriber starts the listening thread
        time.sleep(1.5)  # several retries (backoff from 0.05 s)
        listener.close()
    said = [r.getMessage() for r in caplog.records if "listening for new events" in r.getMessage()]
    assert len(said) == 1, said
    assert "\n" not in said[0] and "failed" in said[0]
