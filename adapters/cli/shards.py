"""`ctxstore shards` and `ctxstore move`: contexts spread over the PostgreSQL servers of
CTXSTORE_SHARDS (adapters/store/shards/)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from ctxstore.adapters.cli.common import JsonFlag, handles_errors, out, print_json

if TYPE_CHECKING:
    from ctxstore.adapters.store.shards.store import ShardedStore


def _open() -> ShardedStore:
    from ctxstore import open_sharded

    return open_sharded()


@handles_errors
def shards(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """The servers of CTXSTORE_SHARDS: each one's name, URL and how many contexts it holds."""
    from ctxstore.adapters.storage.urls import redact

    with _open() as sharded:
        counts = sharded.directory.counts()
        rows = [
            {"name": n, "url": redact(sharded.stores[n].url), "contexts": counts.get(n, 0)}
            for n in sharded.names
        ]
    if as_json:
        print_json(rows)
        return
    for r in rows:
        out.print(f"{r['name']}  {r['contexts']:>8} contexts  {r['url']}", highlight=False)


@handles_errors
def move(
    ctx: typer.Context,
    context: Annotated[str, typer.Argument(help="The context's id.")],
    to: Annotated[str, typer.Option("--to", help="The server's name (`ctxstore shards`).")],
    as_json: JsonFlag = False,
) -> None:
    """Move a context to another server of CTXSTORE_SHARDS; only its own writers wait."""
    with _open() as sharded:
        was = sharded.move(context, to)
    if as_json:
        print_json({"context": context, "from": was, "to": to})
        return
    out.print(f"context {context} moved from {was} to {to}", highlight=False)
