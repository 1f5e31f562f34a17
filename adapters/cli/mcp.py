"""CLI command: `ctxstore mcp`, the Model Context Protocol on stdin/stdout, for an agent's
host (Claude Desktop, an IDE, an agent SDK) to start as a subprocess. The tools are
adapters/http/mcp_server.py's; `ctxstore serve` offers the same at /mcp."""

from __future__ import annotations

from typing import Annotated

import typer

from ctxstore.adapters.cli.common import actor, handles_errors, options

STDIO_THREADS = 4  # store calls one agent's tools run at once


@handles_errors
def mcp(
    ctx: typer.Context,
    allow_writes: Annotated[
        bool,
        typer.Option("--allow-writes", help="Also offer the erase tool (destructive)."),
    ] = False,
    as_json: Annotated[  # (read by handles_errors: the protocol on stdout is JSON already)
        bool, typer.Option("--json", help="Say a failure to start as JSON on stderr.")
    ] = False,
) -> None:
    """Serve this store to an agent over the Model Context Protocol on stdin/stdout: tools
    to search, list and read contexts, their history, diffs and model calls (read-only
    unless --allow-writes). Needs the mcp extra."""
    from concurrent.futures import ThreadPoolExecutor

    # Imported here: the command line starts without the SDK (MissingExtraError without it).
    from ctxstore.adapters.http.auth import Caller, Tokens
    from ctxstore.adapters.http.deps import Service
    from ctxstore.adapters.http.mcp_server import mcp_server
    from ctxstore.adapters.store.facade import ContextStore

    who = Caller(None, actor(ctx))  # the command line's user: every context, every scope
    # It reads an existing store: a typo in --url says so rather than making an empty one.
    with (
        ContextStore.from_url(options(ctx).url, create=False) as store,
        ThreadPoolExecutor(STDIO_THREADS, thread_name_prefix="ctxstore-mcp") as pool,
    ):
        server = mcp_server(Service(store, pool, Tokens({})), lambda _: who, allow_writes)
        try:
            server.run("stdio")  # until the host closes stdin
        except KeyboardInterrupt:
            raise typer.Exit(130) from None
