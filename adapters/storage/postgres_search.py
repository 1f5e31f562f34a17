"""PostgreSQL's search index: the rows in `ctxstore_search` with their words as a tsvector
under a GIN index, ranked by `ts_rank_cd`.

The tsvector is written from the index's own words (domain/search/text.py: folded, CJK as
pairs, with their positions), not by a text search configuration, so PostgreSQL and SQLite
split a message alike and a query finds the same messages on both. Stores of rows take the
deletion lock shared, as the audit index's do: an erasure or history bound, which takes it
alone, either sees the rows and deletes them or runs first, and then the rows' context is
found gone and nothing is stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eventsourcing.postgres import PostgresDatastore
from psycopg.sql import SQL, Composable, Identifier

from ctxstore.adapters.storage.postgres_audit import DELETION_LOCK
from ctxstore.adapters.storage.search_index import (
    HEADS,
    PENDING,
    POSITION,
    TABLE,
    After,
    Found,
    Read,
    SearchFilter,
    SearchIndex,
    SearchRow,
    sql_filter,
)
from ctxstore.domain.search.query import Query
from ctxstore.domain.search.text import words

MAX_POSITION = 16383  # a tsvector's largest word position (later words share it)
DDL = (
    (
        "CREATE TABLE IF NOT EXISTS {t} (id bigserial PRIMARY KEY, context_id text NOT NULL, "
        "message_id text NOT NULL, version integer NOT NULL, role text NOT NULL, ts bigint NOT NULL, "
        "tenant text, name text, body text NOT NULL, digest text NOT NULL, "
        "visible boolean NOT NULL DEFAULT false, "
        "terms tsvector NOT NULL, UNIQUE (context_id, version, message_id))"
    ),
    "CREATE INDEX IF NOT EXISTS ctxstore_search_terms_idx ON {t} USING gin (terms)",
    "CREATE INDEX IF NOT EXISTS ctxstore_search_message_idx ON {t} (context_id, message_id)",
    "CREATE TABLE IF NOT EXISTS {h} (context_id text PRIMARY KEY, version integer NOT NULL)",
    "CREATE TABLE IF NOT EXISTS {w} (context_id text PRIMARY KEY)",
    (
        "CREATE TABLE IF NOT EXISTS {p} (one integer PRIMARY KEY CHECK (one = 1), "
        "position bigint NOT NULL)"
    ),
)


def tsvector(text: str) -> str:
    """A text's words as a tsvector literal, each with its position."""
    return " ".join(f"'{w}':{min(i, MAX_POSITION)}" for i, w in enumerate(words(text), 1))


def tables(schema: str) -> dict[str, Composable]:
    s = Identifier(schema)
    return {
        k: SQL("{0}.{1}").format(s, Identifier(n))
        for k, n in (("t", TABLE), ("h", HEADS), ("p", POSITION), ("w", PENDING))
    }


def create_tables(c: Any, schema: str) -> None:
    named = tables(schema)
    for statement in DDL:
        c.execute(SQL(statement).format(**named))


def erase_rows(c: Any, schema: str, context_hex: str) -> None:
    """Delete a context's rows (in the caller's transaction, under the deletion lock)."""
    named = tables(schema)
    c.execute(SQL("DELETE FROM {t} WHERE context_id = %s").format(**named), (context_hex,))
    c.execute(SQL("DELETE FROM {h} WHERE context_id = %s").format(**named), (context_hex,))
    c.execute(SQL("DELETE FROM {w} WHERE context_id = %s").format(**named), (context_hex,))


def erase_history_rows(c: Any, schema: str, context_hex: str, through: int) -> None:
    """A history bound removed versions 2..through: their rows go, and the context is
    indexed anew from what it kept (as on SQLite)."""
    named = tables(schema)
    c.execute(
        SQL("DELETE FROM {t} WHERE context_id = %s AND version > 1 AND version <= %s").format(
            **named
        ),
        (context_hex, through),
    )
    c.execute(SQL("DELETE FROM {h} WHERE context_id = %s").format(**named), (context_hex,))
    c.execute(
        SQL("INSERT INTO {w} (context_id) VALUES (%s) ON CONFLICT DO NOTHING").format(**named),
        (context_hex,),
    )


class PostgresSearchIndex(SearchIndex):
    """The search index in the store's PostgreSQL schema."""

    def __init__(self, datastore: PostgresDatastore, events_table: str) -> None:
        self.datastore = datastore
        self.schema = datastore.schema or "public"
        self.named = tables(self.schema)
        self.events = SQL("{0}.{1}").format(Identifier(self.schema), Identifier(events_table))

    def create_table(self) -> None:
        with self.datastore.transaction(commit=True) as c:
            create_tables(c, self.schema)

    def position(self) -> int:
        with self.datastore.transaction(commit=False) as c:
            c.execute(SQL("SELECT position FROM {p}").format(**self.named))
            found = c.fetchone()
            return int(found["position"]) if found else 0

    def advance(self, position: int) -> None:
        with self.datastore.transaction(commit=True) as c:
            c.execute(
                SQL(
                    "INSERT INTO {p} (one, position) VALUES (1, %s) ON CONFLICT (one) "
                    "DO UPDATE SET position = greatest({p}.position, excluded.position)"
                ).format(**self.named),
                (position,),
            )

    def pending(self) -> list[str]:
        with self.datastore.transaction(commit=False) as c:
            c.execute(SQL("SELECT context_id FROM {w}").format(**self.named))
            return [str(r["context_id"]) for r in c.fetchall()]

    def advance_to(self, position: int) -> None:
        with self.datastore.transaction(commit=True) as c:
            c.execute(SQL("DELETE FROM {p}").format(**self.named))
            c.execute(
                SQL("INSERT INTO {p} (one, position) VALUES (1, %s)").format(**self.named),
                (position,),
            )
        self.seen_newest = None

    def head(self, context_hex: str) -> int:
        with self.datastore.transaction(commit=False) as c:
            c.execute(
                SQL("SELECT version FROM {h} WHERE context_id = %s").format(**self.named),
                (context_hex,),
            )
            found = c.fetchone()
            return int(found["version"]) if found else 0

    def newest_event(self) -> int:
        """The newest event id, or -1 while a transaction that writes is in progress in the
        database: ids are taken when an event is inserted, not when it commits, so one in
        progress may still commit an id below the newest (a catch-up that trusted the id
        would skip it)."""
        with self.datastore.transaction(commit=False) as c:
            c.execute(
                SQL(
                    "SELECT (SELECT max(notification_id) FROM {0}) AS n, EXISTS (SELECT 1 "
                    "FROM pg_stat_activity WHERE datname = current_database() "
                    "AND backend_xid IS NOT NULL AND pid <> pg_backend_pid()) AS busy"
                ).format(self.events)
            )
            found = c.fetchone()
            if found is None or found["busy"]:
                return -1
            return int(found["n"] or 0)

    def store(
        self,
        context_hex: str,
        rows: Sequence[SearchRow],
        visible: dict[str, str],
        head: int,
        only: set[str] | None = None,
        read: Read | None = None,
    ) -> bool:
        with self.datastore.transaction(commit=True) as c:
            c.execute("SELECT pg_advisory_xact_lock_shared(%s)", (DELETION_LOCK,))
            # One catch-up at a time stores a context's rows: the checks below hold until
            # this transaction ends.
            c.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                (f"ctxstore_search/{context_hex}",),
            )
            c.execute(
                SQL("SELECT 1 FROM {0} WHERE originator_id = %s LIMIT 1").format(self.events),
                (context_hex,),
            )
            if c.fetchone() is None:  # erased since its events were read
                erase_rows(c, self.schema, context_hex)
                return True
            if read is not None and not self._unchanged(c, context_hex, head, read):
                return False
            if rows:
                c.executemany(
                    SQL(
                        "INSERT INTO {t} (context_id, message_id, version, role, ts, tenant, name, "
                        "body, digest, terms) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s::tsvector) "
                        "ON CONFLICT DO NOTHING"
                    ).format(**self.named),
                    [
                        (
                            r.context_hex,
                            r.message_id,
                            r.version,
                            r.role,
                            r.at,
                            r.tenant,
                            r.name,
                            r.text,
                            r.digest,
                            tsvector(r.text),
                        )
                        for r in rows
                    ],
                )
            c.execute(
                SQL(
                    "SELECT id, message_id, digest, visible FROM {t} WHERE context_id = %s "
                    "AND (%s::text[] IS NULL OR message_id = ANY(%s)) ORDER BY id"
                ).format(**self.named),
                (
                    context_hex,
                    None if only is None else sorted(only),
                    None if only is None else sorted(only),
                ),
            )
            held = [(r["id"], r["message_id"], r["digest"], r["visible"]) for r in c.fetchall()]
            newest = {m: i for i, m, d, _ in held if visible.get(m) == d}  # the last one wins
            shown = set(newest.values())
            on = [i for i, _, _, was in held if not was and i in shown]
            off = [i for i, _, _, was in held if was and i not in shown]
            for ids, value in ((on, True), (off, False)):
                if ids:
                    c.execute(
                        SQL("UPDATE {t} SET visible = %s WHERE id = ANY(%s)").format(**self.named),
                        (value, ids),
                    )
            c.execute(
                SQL(
                    "INSERT INTO {h} (context_id, version) VALUES (%s, %s) ON CONFLICT (context_id) "
                    "DO UPDATE SET version = greatest({h}.version, excluded.version)"
                ).format(**self.named),
                (context_hex, head),
            )
            c.execute(
                SQL("DELETE FROM {w} WHERE context_id = %s").format(**self.named), (context_hex,)
            )
        return True

    def _unchanged(self, c: Any, context_hex: str, head: int, read: Read) -> bool:
        """Whether the index still holds the version the reader started from, and every
        event it read is still stored."""
        c.execute(
            SQL(
                "SELECT (SELECT version FROM {h} WHERE context_id = %s) AS held, "
                "(SELECT count(*) FROM {e} WHERE originator_id = %s AND originator_version > %s "
                "AND originator_version <= %s) AS events"
            ).format(e=self.events, **self.named),
            (context_hex, context_hex, read.since, head),
        )
        found = c.fetchone()
        return int(found["held"] or 0) == read.since and int(found["events"]) == read.events

    def forget(self, context_hex: str) -> None:
        with self.datastore.transaction(commit=True) as c:
            erase_rows(c, self.schema, context_hex)

    def query(
        self, query: Query, where: SearchFilter, after: After | None, limit: int
    ) -> list[Found]:
        clauses, params = _filter(where)
        page = ""
        if after is not None:
            page = "WHERE score < %s OR (score = %s AND id > %s)"
            params += [after.score, after.score, after.key]
        # float8: a score read back from a cursor compares equal to the one ranked again.
        sql = SQL(
            "SELECT * FROM (SELECT s.id, s.context_id, s.message_id, s.version, s.role, s.ts, "
            "s.tenant, s.name, s.body, s.digest, s.visible, ts_rank_cd(s.terms, q, 1)::float8 AS score "
            "FROM {t} s, CAST(%s AS tsquery) q WHERE s.terms @@ q" + clauses + ") found "
            + page + " ORDER BY score DESC, id LIMIT %s"
        ).format(**self.named)  # fmt: skip
        with self.datastore.transaction(commit=False) as c:
            c.execute(sql, (query.tsquery(), *params, limit))
            return [_found(r) for r in c.fetchall()]

    def reset(self) -> None:
        with self.datastore.transaction(commit=True) as c:
            c.execute("SELECT pg_advisory_xact_lock_shared(%s)", (DELETION_LOCK,))
            for k in ("t", "h", "p", "w"):
                c.execute(SQL("DELETE FROM {0}").format(self.named[k]))

    def count(self) -> int:
        with self.datastore.transaction(commit=False) as c:
            c.execute(SQL("SELECT count(*) AS n FROM {t}").format(**self.named))
            found = c.fetchone()
            return int(found["n"]) if found else 0


def _filter(where: SearchFilter) -> tuple[str, list[Any]]:
    return sql_filter(
        where, "%s", "s.visible", lambda column, values: (f"{column} = ANY(%s)", [list(values)])
    )


def _found(r: Any) -> Found:
    row = SearchRow(
        context_hex=r["context_id"], message_id=r["message_id"], version=r["version"],
        role=r["role"], at=r["ts"], tenant=r["tenant"], text=r["body"], digest=r["digest"],
        name=r["name"],
    )  # fmt: skip
    return Found(row=row, score=float(r["score"]), key=int(r["id"]), visible=bool(r["visible"]))


__all__ = ["PostgresSearchIndex", "create_tables", "erase_history_rows", "erase_rows", "tsvector"]
