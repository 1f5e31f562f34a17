"""PostgreSQL appends take no table lock, so events commit out of notification-id order.
Audit cursors must still see every committed event exactly once, in an order that never
goes back: checked with writers whose transactions commit late (a trigger sleeps inside
them), abort (the trigger raises), and an unrelated transaction that holds an xid open."""

from __future__ import annotations

import threading
import time
import uuid

import psycopg
import pytest

from ctxstore.adapters.settings import Settings
from ctxstore.adapters.store.facade import ContextStore
from ctxstore.domain.errors import CtxStoreError

from ..conftest import make_url

pytestmark = pytest.mark.postgres

WRITERS = 6
APPENDS = 40

# Inside an append's transaction, after its rows are inserted: a random delay (now and then
# a long one), so transactions with smaller xids commit after larger ones; and one in
# twelve aborts.
CHAOS = """
CREATE FUNCTION {schema}.chaos() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF random() < 0.03 THEN PERFORM pg_sleep(0.3); ELSE PERFORM pg_sleep(random() * 0.02); END IF;
  IF random() < 0.08 THEN RAISE EXCEPTION 'injected abort'; END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER chaos AFTER INSERT ON {schema}.ctxstore_events
  FOR EACH STATEMENT EXECUTE FUNCTION {schema}.chaos();
"""


def _conn(url: str) -> psycopg.Connection:
    base, _, query = url.partition("?schema=")
    return psycopg.connect(base, autocommit=True, options=f"-c search_path={query}")


def _schema(url: str) -> str:
    return url.partition("?schema=")[2]


def _write(url: str, done: list[int], failures: list[str]) -> None:
    with ContextStore.from_url(url, Settings(actor="writer")) as s:
        cid = None
        while cid is None:
            try:
                cid = s.create(name="w")
            except CtxStoreError:
                continue
        for i in range(APPENDS):
            try:
                s.insert(cid, [{"role": "user", "content": f"m{i}"}])
                done.append(1)
            except CtxStoreError as exc:
                failures.append(type(exc).__name__)


def _follow(url: str, seen: list[tuple[int, str, int]], stop: threading.Event) -> None:
    """Page through the audit from the start, as an HTTP client's cursor would, until
    told to stop and nothing new arrives."""
    with ContextStore.from_url(url, Settings(actor="reader")) as s:
        after = 0
        quiet_since: float | None = None  # since when pages came back empty, once stopped
        while True:
            page = s.audit(after=after, limit=37)
            for e in page.entries:
                seen.append((e.position, str(e.context_id), e.version))
            after = int(page.cursor)
            if page.entries:
                quiet_since = None
                continue
            if stop.is_set():
                # An empty page can come while another transaction (the other reader's
                # indexing) holds the horizon back: only a quiet half second means done.
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since > 0.5:
                    return
            time.sleep(0.005)


def _follow_ids(url: str, seen: set[tuple[str, int]], stop: threading.Event) -> None:
    """The naive follower, for contrast: by notification id, as with the table lock."""
    with _conn(url) as conn:
        last = 0
        while True:
            rows = conn.execute(
                "SELECT notification_id, originator_id, originator_version FROM ctxstore_events "
                "WHERE notification_id > %s ORDER BY notification_id LIMIT 100",
                (last,),
            ).fetchall()
            for n, c, v in rows:
                seen.add((str(c), v))
                last = n
            if not rows:
                if stop.is_set():
                    return
                time.sleep(0.002)


def test_cursors_see_every_committed_event_once_when_commits_come_out_of_order(
    tmp_path, request
) -> None:
    url = make_url("postgres", tmp_path, request)
    ContextStore.from_url(url).close()  # creates the tables
    with _conn(url) as conn:
        conn.execute(CHAOS.format(schema=f'"{_schema(url)}"'))

    stop = threading.Event()
    readers: list[list[tuple[int, str, int]]] = [[], []]  # two stores indexing at once
    follow = [threading.Thread(target=_follow, args=(url, seen, stop)) for seen in readers]
    naive: set[tuple[str, int]] = set()
    follow.append(threading.Thread(target=_follow_ids, args=(url, naive, stop)))
    done: list[int] = []
    failures: list[str] = []
    writers = [threading.Thread(target=_write, args=(url, done, failures)) for _ in range(WRITERS)]
    for t in follow + writers:
        t.start()
    # An unrelated transaction holds an xid for a while, then aborts: cursors wait for
    # it (events after it are not yet certain to be complete), then go on.
    with _conn(url) as holder:
        holder.execute("BEGIN")
        holder.execute("SELECT pg_current_xact_id()")
        time.sleep(1.0)
        holder.execute("ROLLBACK")
    for t in writers:
        t.join()
    stop.set()
    for t in follow:
        t.join(timeout=60)
        assert not t.is_alive()

    with _conn(url) as conn:
        committed = {
            (str(r[0]), r[1])
            for r in conn.execute("SELECT originator_id, originator_version FROM ctxstore_events")
        }
    assert failures, "the trigger aborted no append: the test would prove nothing"
    # Events committed out of id order: following ids skipped some of them.
    assert committed - naive, "no event committed out of order: the test would prove nothing"
    assert len(committed) >= len(done)
    for seen in readers:
        positions = [p for p, _, _ in seen]
        assert positions == sorted(set(positions)), "a cursor went back or saw a row twice"
        events = [(c, v) for _, c, v in seen]
        assert len(events) == len(set(events)), "an event seen twice"
        assert set(events) == committed, "a committed event missed, or an aborted one seen"
    # Both readers saw one numbering: positions are the index's, shared by every reader.
    assert readers[0] == readers[1]


def test_a_client_reads_its_own_append_while_an_older_transaction_runs(tmp_path, request):
    """An append committed while an older transaction still runs is below no horizon yet:
    the writer's own audit read waits for the older one to end, then shows the append."""
    url = make_url("postgres", tmp_path, request)
    with ContextStore.from_url(url, Settings(actor="a")) as s, _conn(url) as holder:
        cid = s.create(name="mine")
        holder.execute("BEGIN")
        holder.execute("SELECT pg_current_xact_id()")
        s.insert(cid, [{"role": "user", "content": "hello"}])
        threading.Timer(0.4, lambda: holder.execute("COMMIT")).start()
        page = s.audit(context_id=cid)
        # Version 2 is above the horizon until the older transaction ends: that it is
        # here means the read waited for it rather than skip the append.
        assert [e.version for e in page.entries] == [1, 2]


def test_an_upgraded_store_indexes_events_written_before_and_after(tmp_path, request):
    """A store whose events predate the commit order (xid 0) keeps its positions and
    indexes what was not indexed yet before new events."""
    url = make_url("postgres", tmp_path, request)
    with ContextStore.from_url(url, Settings(actor="a")) as s:
        cid = s.create(name="old")
        s.insert(cid, [{"role": "user", "content": "one"}])
        first = [e.position for e in s.audit().entries]
        s.insert(cid, [{"role": "user", "content": "two"}])  # not indexed yet
    with _conn(url) as conn:  # as a database written before migration 9
        conn.execute("UPDATE ctxstore_events SET commit_xid = '0'")
        conn.execute("DELETE FROM ctxstore_audit_cursor")
        conn.execute(
            "INSERT INTO ctxstore_audit_cursor SELECT notification_id, '0', notification_id "
            "FROM ctxstore_audit_tracking"
        )
    with ContextStore.from_url(url, Settings(actor="a")) as s:
        s.insert(cid, [{"role": "user", "content": "three"}])
        entries = s.audit().entries
    assert [e.position for e in entries][: len(first)] == first
    assert [e.version for e in entries] == [1, 2, 3, 4]
    assert [e.position for e in entries] == sorted({e.position for e in entries})
    assert uuid.UUID(str(entries[0].context_id)) == uuid.UUID(str(cid))


def _notified(url: str, write: object, wait: float = 0.5) -> list[str]:
    """The payloads the schema's channel carries while `write()` runs."""
    from ctxstore.adapters.storage.postgres_schema import channel

    with _conn(url) as conn:
        conn.execute(f'LISTEN "{channel(_schema(url))}"')
        write()  # type: ignore[operator]
        return [n.payload for n in conn.notifies(timeout=wait, stop_after=10)]


def test_writes_notify_only_contexts_someone_follows(tmp_path, request) -> None:
    """A NOTIFY's commit takes a database-wide lock: writes to contexts nobody follows
    send none, so they do not queue behind each other; a follower's context still wakes
    followers in other processes at once."""
    url = make_url("postgres", tmp_path, request)
    with ContextStore.from_url(url, Settings(actor="a")) as writer:
        followed, other = writer.create(name="followed"), writer.create(name="other")

        def append(cid: uuid.UUID) -> object:
            return lambda: writer.insert(cid, [{"role": "user", "content": "x"}])

        assert _notified(url, append(followed)) == []
        with ContextStore.from_url(url, Settings(actor="b")) as follower:
            woken: list[str | None] = []
            stop = follower.hooks.watch(woken.append, followed)
            try:
                assert _notified(url, append(other)) == []
                assert _notified(url, append(followed)) == [str(followed)]
                deadline = time.monotonic() + 5
                while followed.hex not in woken and time.monotonic() < deadline:
                    time.sleep(0.01)
                assert followed.hex in woken  # the follower's store was woken
            finally:
                stop()
        # The follower's store closed: its registration went with it.
        assert _notified(url, append(followed)) == []
