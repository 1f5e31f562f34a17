"""Running a store: `ctxstore serve` (the HTTP service on uvicorn), `ctxstore migrate`,
`ctxstore keygen`."""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
from typing import Annotated

import typer

from ctxstore.adapters.cli.common import (
    JsonFlag,
    err,
    handles_errors,
    open_store,
    options,
    out,
    print_json,
)
from ctxstore.domain.errors import ConfigurationError, InvalidOperationError


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@handles_errors
def serve(
    ctx: typer.Context,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port to listen on.")] = 8080,
    workers: Annotated[
        int, typer.Option(min=1, help="Worker processes (each with its own store connection).")
    ] = 1,
    log_level: Annotated[str, typer.Option(help="uvicorn's log level.")] = "info",
    allow_anonymous: Annotated[
        bool,
        typer.Option(help="Serve without tokens on a non-loopback address (anyone can read)."),
    ] = False,
) -> None:
    """Serve the store over HTTP (OpenAPI at /openapi.json; MCP at /mcp; the web view at
    /ui), or the servers of CTXSTORE_SHARDS when it is set and --url is not. Tokens:
    CTXSTORE_SERVICE__TOKENS."""
    import uvicorn

    from ctxstore import open_sharded
    from ctxstore.adapters.settings import load_settings
    from ctxstore.adapters.storage.urls import redact

    named = options(ctx).url
    sharded = not named and bool(load_settings().shards)
    # Fail here, with a clear message, if it cannot be opened.
    with open_sharded() if sharded else open_store(ctx) as store:
        config = store.settings.service
        url = store.url
        stored = store.admin.stored_tokens is not None and store.admin.stored_tokens.any()
    if not config.tokens and not stored and not _loopback(host) and not allow_anonymous:
        err.print(
            f"[red]refusing to serve {host} without tokens[/red]: set "
            'CTXSTORE_SERVICE__TOKENS=\'{"<token>": "<tenant>"}\' or pass --allow-anonymous'
        )
        raise typer.Exit(1)
    _check_free(host, port)
    mode = "tokens" if config.tokens or stored else "no auth"
    err.print(
        f"ctxstore serving {redact(url)} on http://{host}:{port} ({mode}, {workers} worker(s))"
    )
    if named:
        os.environ["CTXSTORE_URL"] = named  # the workers open the store the option named
        os.environ["CTXSTORE_SHARDS"] = ""  # (and it alone)
    uvicorn.run(
        "ctxstore.adapters.http.app:app_from_settings",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level=log_level,
        timeout_graceful_shutdown=5,  # live tails never end by themselves: cut them at stop
    )


def _check_free(host: str, port: int) -> None:
    """Refuse, in one line, an address the service could not listen on (in use, not this
    machine's), before saying it serves there."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise ConfigurationError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            said = "in use" if exc.errno == errno.EADDRINUSE else (exc.strerror or str(exc))
            raise ConfigurationError(
                f"cannot listen on {host}:{port}: {said} (choose another with --port)"
            ) from None


@handles_errors
def keygen(
    ctx: typer.Context,
    size: Annotated[int, typer.Option(help="Key size in bytes: 16, 24 or 32.")] = 32,
    as_json: JsonFlag = False,
) -> None:
    """Print a new key for CTXSTORE_ENCRYPTION_KEY (AES-GCM at rest). Keep it safe: without
    it the events cannot be read."""
    from eventsourcing.cryptography import AESCipher

    if size not in AESCipher.KEY_SIZES:
        raise InvalidOperationError(f"--size must be 16, 24 or 32, got {size}")
    key = AESCipher.create_key(size)
    if as_json:
        print_json({"key": key, "size": size})
    else:
        print(key)


@handles_errors
def migrate(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """Bring the store's schema to this release's version; run it as the owner of the
    tables (a store opened by its owner does it by itself)."""
    from ctxstore.adapters.store.facade import ContextStore  # (see common.open_store)

    applied = ContextStore.setup(options(ctx).url)
    with open_store(ctx) as store:
        version = store.admin.schema_version()
    if as_json:
        print_json({"version": version, "applied": [m.version for m in applied]})
        return
    for m in applied:
        out.print(f"applied migration {m.version}: {m.description}", highlight=False)
    out.print(f"schema at version {version}", highlight=False)
