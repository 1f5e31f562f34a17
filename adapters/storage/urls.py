"""A store's URL as the eventsourcing library's environment: SQLite's file (spelled as
SQLAlchemy spells it), PostgreSQL's hosts, schema, libpq parameters and timeouts, the
replicas a URL names; and the URL as messages show it (no password)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import parse_qs, parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from ctxstore.domain.errors import ConfigurationError, StoreURLError


def redact(url: str) -> str:
    """The URL without its password, for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    return url.replace(f":{parts.password}@", ":***@", 1)


SYNCHRONOUS = "CTXSTORE_SQLITE_SYNCHRONOUS"  # the library environment's entry the pool reads
READ_ONLY = "CTXSTORE_SQLITE_READ_ONLY"  # why the file can only be read (the pool opens it so)


def library_env(
    url: str,
    connect_timeout: int = 10,
    statement_timeout: int = 30,
    *,
    create: bool = True,
    sqlite_synchronous: str = "full",
) -> dict[str, str]:
    """The eventsourcing environment for a store URL; raises StoreURLError. Without
    `create`, a SQLite file that does not exist is refused, and no folder is made."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "memory":
        return {"PERSISTENCE_MODULE": "eventsourcing.popo"}
    if scheme == "sqlite":
        return {**_sqlite_env(url, create=create), SYNCHRONOUS: sqlite_synchronous.upper()}
    if scheme.split("+")[0] in ("postgresql", "postgres"):  # postgresql+psycopg:// too
        if not parts.path.strip("/"):
            raise StoreURLError(f"postgresql URL names no database: {redact(url)!r}")
        query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        hosts = url_hosts(parts.netloc, url)
        if len(hosts) > 1:  # libpq tries them in order (target_session_attrs picks the role)
            query.setdefault("host", ",".join(h for h, _ in hosts))
            query.setdefault("port", ",".join(p for _, p in hosts))
        env = {
            "PERSISTENCE_MODULE": "eventsourcing.postgres",
            "POSTGRES_DBNAME": unquote(parts.path.strip("/")),
            "POSTGRES_HOST": hosts[0][0],
            "POSTGRES_PORT": hosts[0][1],
            "POSTGRES_USER": unquote(parts.username or "postgres"),
            "POSTGRES_PASSWORD": unquote(parts.password or ""),
            "POSTGRES_CONNECT_TIMEOUT": str(connect_timeout),
            "POSTGRES_STATEMENT_TIMEOUT": str(statement_timeout),  # ours, not the library's
            # The database-function write path doubles the append rate.
            "POSTGRES_ENABLE_DB_FUNCTIONS": "y",
            # Its insert function takes no table lock; the audit index follows commit order.
            "APPLICATION_RECORDER_TOPIC": "ctxstore.adapters.storage.postgres_recorder:OrderedPostgresRecorder",
        }
        if "schema" in query:
            env["POSTGRES_SCHEMA"] = query.pop("schema")
        env[LIBPQ_PARAMS] = json.dumps(libpq_params(query))
        return env
    raise StoreURLError(
        f"unknown store URL {redact(url)!r}: use sqlite:///path.db, postgresql://user@host/db "
        "or memory://"
    )


def url_hosts(netloc: str, url: str) -> list[tuple[str, str]]:
    """The (host, port) pairs of a PostgreSQL URL's netloc, as libpq reads them:
    `h1:p1,h2:p2`, `[::1]:5432`, a host without a port (5432), none at all (localhost).
    Raises StoreURLError for a port that is not a number."""
    hostlist = unquote(netloc.rpartition("@")[2])
    found = []
    for item in hostlist.split(",") if hostlist else [""]:
        if item.startswith("["):  # an IPv6 address
            name, _, rest = item[1:].partition("]")
            port = rest.removeprefix(":")
        else:
            name, _, port = item.partition(":")
        if port and not port.isdigit() or port and not 0 < int(port) < 65536:
            raise StoreURLError(f"PostgreSQL URL port {port!r} is not a port: {redact(url)!r}")
        found.append((name or "localhost", port or "5432"))
    return found


WRITABLE = ("read-write", "primary")  # libpq's target_session_attrs that only a primary meets


def replica_urls(url: str) -> tuple[str, list[str]]:
    """A store URL without its `replica=host[:port]` parameters, and the replicas' URLs
    they name: the same URL (user, database, schema, parameters) on each replica's host.
    Raises StoreURLError when a non-PostgreSQL URL names replicas."""
    parts = urlsplit(url)
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    hosts = [v for k, v in pairs if k == "replica"]
    if not hosts:
        return url, []
    if parts.scheme.lower().split("+")[0] not in ("postgresql", "postgres"):
        raise StoreURLError(f"only PostgreSQL has replicas: {redact(url)!r}")
    rest = urlencode([(k, v) for k, v in pairs if k != "replica"])
    primary = urlunsplit(parts._replace(query=rest))
    # A replica is a standby on its own host: the primary's hosts (as parameters) and its
    # demand for a writable session would send it elsewhere or refuse it.
    rest = urlencode([
        (k, v) for k, v in pairs
        if k not in ("replica", "host", "hostaddr", "port")
        and not (k == "target_session_attrs" and v in WRITABLE)
    ])  # fmt: skip
    auth = parts.netloc.rpartition("@")[0]
    replicas = []
    for host in hosts:
        name, _, port = host.strip().partition(":")
        if not name or (port and not port.isdigit()):
            raise StoreURLError(f"replica={host!r} is not host or host:port")
        netloc = (auth + "@" if auth else "") + f"{name}:{port or 5432}"
        replicas.append(urlunsplit(parts._replace(netloc=netloc, query=rest)))
    return primary, replicas


LIBPQ_PARAMS = "CTXSTORE_LIBPQ"  # the URL's libpq parameters, as JSON, in the library env


def libpq_params(query: dict[str, str]) -> dict[str, str]:
    """The URL's query parameters, each a libpq connection keyword (sslmode, sslrootcert,
    connect_timeout, application_name, host=/socket/dir, options, ...); raises
    StoreURLError naming one libpq does not know: none is ever dropped."""
    from psycopg.pq import Conninfo  # only for PostgreSQL URLs: the CLI starts faster

    known = {d.keyword.decode() for d in Conninfo.get_defaults()}
    unknown = sorted(set(query) - known)
    if unknown:
        raise StoreURLError(
            f"unknown PostgreSQL URL parameter(s) {unknown}: use libpq's connection keywords "
            "(sslmode, sslrootcert, connect_timeout, application_name, host, ...) or schema"
        )
    return query


def _sqlite_env(url: str, *, create: bool) -> dict[str, str]:
    """SQLite URLs as SQLAlchemy spells them: sqlite:///relative.db, sqlite:////abs.db,
    sqlite:///:memory:; anything else is refused with the right spelling."""
    rest = url[len("sqlite:") :]
    if not rest.startswith("//"):
        raise StoreURLError(
            f"{url!r} is not a SQLite URL: write sqlite:///{rest or 'path.db'} (relative) or "
            f"sqlite:////absolute/{Path(rest).name or 'path.db'}"
        )
    if rest in ("//", "///"):
        raise StoreURLError(f"sqlite URL names no file: {url!r} (use sqlite:///path.db)")
    if rest[2:3] != "/":
        raise StoreURLError(
            f"{url!r} names a host; SQLite takes none: write sqlite:///path.db (three slashes)"
        )
    path = unquote(rest[3:].split("?", 1)[0])
    if not path:
        raise StoreURLError(f"sqlite URL names no file: {url!r} (use sqlite:///path.db)")
    if path != ":memory:":
        file = Path(path).expanduser()
        if not create and not file.is_file():
            raise StoreURLError(f"no store at {file}: nothing was created (check the URL)")
        try:
            file.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # a read-only home, a file where a folder should be, ...
            raise ConfigurationError(
                f"cannot create the store's folder {file.parent}: "
                f"{exc.strerror or type(exc).__name__}; set CTXSTORE_DATA_DIR to a writable "
                "folder or CTXSTORE_URL to another store"
            ) from None
        path = str(file)
    env = {
        # The library's SQLite factory, its connections keeping their compiled statements.
        "PERSISTENCE_MODULE": "ctxstore.adapters.storage.sqlite_pool:SQLiteStoreFactory",
        "SQLITE_DBNAME": path,
        "SQLITE_LOCK_TIMEOUT": "30",
        # The library's recorder with a shorter path into its write transaction.
        "APPLICATION_RECORDER_TOPIC": "ctxstore.adapters.storage.sqlite_recorder:SQLiteEventsRecorder",
    }
    why = read_only_reason(Path(path)) if path != ":memory:" else ""
    if why:
        env[READ_ONLY] = why
    return env


def read_only_reason(file: Path) -> str:
    """Why an existing SQLite store can only be read ("" when it can be written or does not
    exist): SQLite writes the file, and beside it the log (-wal) and its index (-shm)."""
    if not file.is_file():
        return ""
    folder = os.access(file.parent, os.W_OK)
    writable = os.access(file, os.W_OK)
    if not folder and not writable:
        return f"neither the file {file.name} nor its folder {file.parent} is writable"
    if not folder:
        return f"its folder {file.parent} is not writable"
    return "" if writable else f"the file {file.name} is not writable"
