"""CLI command: search across contexts."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.text import Text

from ctxstore.adapters.cli.audit import parse_time
from ctxstore.adapters.cli.common import JsonFlag, handles_errors, open_store, out, print_json
from ctxstore.adapters.cli.terminal import shown

if TYPE_CHECKING:
    from ctxstore.projections.search import SearchHit

OPEN, CLOSE = "«", "»"  # how a snippet marks its match (domain/search/snippet.py)


@handles_errors
def search(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help='Words (all must match) and "quoted phrases".')],
    context: Annotated[
        list[str] | None, typer.Option("--context", help="Only this context (repeat for more).")
    ] = None,
    role: Annotated[
        list[str] | None, typer.Option("--role", help="Only messages of this role (repeatable).")
    ] = None,
    since: Annotated[
        str | None, typer.Option(help="Written from this time (ISO 8601, or an age: 30m, 2d).")
    ] = None,
    until: Annotated[
        str | None, typer.Option(help="Written before this time (same forms).")
    ] = None,
    all_: Annotated[
        bool,
        typer.Option("--all", help="Also deleted, replaced, compressed and rolled back messages."),
    ] = False,
    limit: Annotated[int, typer.Option(min=1, max=100, help="At most this many hits.")] = 20,
    cursor: Annotated[
        str | None, typer.Option(help="The next page (printed after a page).")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Search the messages of every context: one line a hit (context, message, snippet)."""
    with open_store(ctx) as store:
        page = store.search(
            query, context_ids=context, roles=role, since=parse_time(since, "--since"),
            until=parse_time(until, "--until"), include_hidden=all_, limit=limit, cursor=cursor,
        )  # fmt: skip
    if as_json:
        print_json(page.model_dump(mode="json"))
        return
    if not page.hits:
        out.print(f"no message matches {query!r}", highlight=False)
        return
    for hit in page.hits:
        out.print(_line(hit), highlight=False, soft_wrap=True)
    if page.cursor is not None:
        out.print(f"more: --cursor {page.cursor}", style="dim", highlight=False)


def _line(hit: SearchHit) -> Text:
    where = hit.context_name or str(hit.context_id)[:8]
    line = Text(f"{shown(where)}  ", style="bold")
    line.append(f"{hit.message_id} {hit.role}  ", style="dim")
    rest = shown(hit.snippet)
    while OPEN in rest and CLOSE in rest.split(OPEN, 1)[1]:
        before, after = rest.split(OPEN, 1)
        match, rest = after.split(CLOSE, 1)
        line.append(before)
        line.append(match, style="reverse")
    line.append(rest)
    if not hit.visible:
        line.append("  (hidden)", style="dim")
    return line
