"""Reads of one context: show, log, prompt, batches, tokens; and `key`, which finds (or
creates) the context an SDK's own key names."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from ctxstore.adapters.cli.audit import parse_time, render_change
from ctxstore.adapters.cli.calls import show_call
from ctxstore.adapters.cli.common import (
    SHAPE_NAMES,
    JsonFlag,
    LimitOption,
    OffsetOption,
    actor,
    err,
    handles_errors,
    json_option,
    open_store,
    out,
    page_of,
    paged,
    preview,
    print_json,
    print_table,
    render_history,
    render_visible,
    token_label,
)
from ctxstore.domain.errors import ContextNotFoundError, InvalidMessageError
from ctxstore.domain.shapes import FORMATS


@handles_errors
def show(
    ctx: typer.Context,
    context: str,
    at_version: Annotated[
        int | None, typer.Option(help="Show the context as it was at this version.")
    ] = None,
    at_time: Annotated[
        str | None,
        typer.Option(help="Show it as it was at this time: ISO 8601, or an age (30m, 2h, 1d)."),
    ] = None,
    openai: Annotated[
        bool,
        typer.Option("--openai", help="With --json: only the messages, as the API takes them."),
    ] = False,
    call: Annotated[
        int | None,
        typer.Option(help="Show exactly what recorded model call N sent (1 first, -1 last)."),
    ] = None,
    shape: Annotated[
        str | None,
        typer.Option(
            "--format",
            help=f"Print it as JSON in this shape: {SHAPE_NAMES} "
            "(what cannot cross is named on stderr).",
        ),
    ] = None,
    limit: LimitOption = None,
    offset: OffsetOption = 0,
    as_json: JsonFlag = False,
) -> None:
    """Print the visible context (now, at a past version, or as a model call saw it); a
    long one pages on a terminal, --limit/--offset take a slice of its messages."""
    if call is not None:
        show_call(ctx, context, call, openai, as_json)
        return
    with open_store(ctx) as store:
        v = store.visible(context, at_version=at_version, at_time=parse_time(at_time, "--at-time"))
    if shape is not None:
        if shape not in FORMATS:
            raise InvalidMessageError(f"--format is one of {', '.join(FORMATS)}, not {shape!r}")
        done = v.model_copy(update={"messages": page_of(v.messages, offset, limit)}).conversion(
            shape
        )
        print_json(done.payload)
        for left in done.omitted:
            err.print(f"left out: {left['id']} {left['what']}: {left['why']}", highlight=False)
    elif as_json and openai:
        print_json(page_of(v.to_openai(), offset, limit))
    elif as_json:
        dumped = v.model_dump(mode="json", exclude_none=True)
        dumped["messages"] = page_of(dumped["messages"], offset, limit)
        if offset or limit is not None:
            dumped["offset"], dumped["total_messages"] = offset, len(v.messages)
        print_json(dumped)
    else:
        with paged():
            render_visible(v, offset, limit)


@handles_errors
def log(
    ctx: typer.Context,
    context: str,
    type_: Annotated[
        list[str] | None, typer.Option("--type", help="Only these event types.")
    ] = None,
    by: Annotated[str | None, typer.Option("--by", help="Only events of this actor.")] = None,
    from_version: Annotated[int | None, typer.Option(help="Only from this version.")] = None,
    to_version: Annotated[int | None, typer.Option(help="Only up to this version.")] = None,
    changes: Annotated[
        bool, typer.Option("--changes", help="Show what each event changed in the context.")
    ] = False,
    limit: LimitOption = None,
    offset: OffsetOption = 0,
    as_json: JsonFlag = False,
) -> None:
    """Print the context's history: every event, rolled-back ones marked; a long one pages
    on a terminal, --limit/--offset take a slice of the events (after the filters)."""
    with open_store(ctx) as store:
        entries = store.history(
            context, types=type_ or None, actor=by, from_version=from_version,
            to_version=to_version, changes=changes,
        )  # fmt: skip
    entries = page_of(entries, offset, limit)
    if as_json:
        # Every field, as `audit --json` and HTTP give it (a null reverted_by included).
        print_json(
            [
                h.model_dump(mode="json", exclude={"changes"} if not h.changes else None)
                for h in entries
            ]
        )
        return
    with paged():
        render_history(entries)
        if changes:
            for h in entries:
                if h.changes is not None and not h.changes.empty:
                    out.print(f"v{h.version} {h.type}:", style="bold", highlight=False)
                    render_change(h.changes)


@handles_errors
def prompt(
    ctx: typer.Context,
    context: str,
    budget: Annotated[int, typer.Option(help="The model's token budget for this request.")],
    strategy: Annotated[
        str | None,
        typer.Option(
            help="full, compressed, adaptive or semantic (default: CTXSTORE_PROMPT__STRATEGY)."
        ),
    ] = None,
    query: Annotated[
        str | None, typer.Option(help="For semantic: what relevance is measured against.")
    ] = None,
    safety: Annotated[
        float | None, typer.Option(help="Share of the budget to fill (default 0.9).")
    ] = None,
    resources: Annotated[
        str | None,
        typer.Option(
            help='Optional items as JSON: [{"id": .., "tokens" or "text": .., "priority": ..}].'
        ),
    ] = None,
    at_version: Annotated[
        int | None, typer.Option(help="Build from the context as it was at this version.")
    ] = None,
    openai: Annotated[
        bool,
        typer.Option("--openai", help="With --json: only the messages, as the API takes them."),
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Choose what to send under a token budget, and say what was left out and why."""
    items = json_option(resources, "--resources") or []
    if not isinstance(items, list):
        raise InvalidMessageError("--resources must be a JSON list")
    with open_store(ctx) as store:
        p = store.build_prompt(
            context,
            budget,
            strategy,  # type: ignore[arg-type]  # checked by build_prompt
            query=query,
            resources=items,
            safety=safety,
            at_version=at_version,
        )
    if as_json:
        print_json(p.to_openai() if openai else p.model_dump(mode="json", exclude_none=True))
        return
    table = Table(
        title=f"prompt: {p.strategy}, {token_label(p.tokens, p.estimated)} of {p.limit} tokens "
        f"(budget {p.budget})"
    )
    for col in ("id", "role", "content"):
        table.add_column(col, overflow="fold")
    for m in p.messages:
        table.add_row(m.id or "", m.role, Text(preview(m.text()) or ", ".join(m.call_ids)))
    out.print(table)
    for o in p.omitted:
        out.print(Text(f"left out {o.id}: {o.reason}"), style="dim")
    if p.resources or p.omitted_resources:
        out.print(
            f"resources kept: {', '.join(p.resources) or '-'} "
            f"({p.resource_tokens} tokens, {p.resource_utilization:.0%} of what was left)"
        )
        for r in p.omitted_resources:
            out.print(Text(f"resource {r.id} left out: {r.reason}"), style="dim")


@handles_errors
def batches(ctx: typer.Context, context: str, as_json: JsonFlag = False) -> None:
    """The open batches above batch 0, lowest first (what batch-end can roll back to)."""
    with open_store(ctx) as store:
        found = store.batches(context)
    if as_json:
        print_json([b.model_dump(mode="json") for b in found])
        return
    table = Table(title="open batches")
    for col in ("batch", "opened at version", "visible messages then"):
        table.add_column(col)
    for b in found:
        table.add_row(str(b.batch), str(b.opened_at_version), str(b.visible_at_open))
    print_table(table, "no open batches (only batch 0; batch-start opens one)")


@handles_errors
def tokens(
    ctx: typer.Context,
    context: str,
    points: Annotated[int, typer.Option(help="At most this many points (2-600).")] = 50,
    as_json: JsonFlag = False,
) -> None:
    """Visible tokens over the versions, compactions and rollbacks marked."""
    with open_store(ctx) as store:
        series = store.token_series(context, points=points)
    if as_json:
        print_json(series.model_dump(mode="json"))
        return
    for point in series.points:
        out.print(f"v{point.version:<8} {point.tokens:>9} tokens {point.messages:>7} messages")


@handles_errors
def key(
    ctx: typer.Context,
    key: Annotated[str, typer.Argument(help="Your own id for the context: a session id.")],
    name: Annotated[str | None, typer.Option(help="Its name when created.")] = None,
    no_create: Annotated[
        bool, typer.Option("--no-create", help="Only look: exit 3 when none was created.")
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Print the id of the context your key names, creating it on first use."""
    with open_store(ctx) as store:
        if no_create:
            found = store.lookup_key(key)
            if found is None:
                raise ContextNotFoundError(f"no context was created for key {key!r}")
            cid = found
        else:
            cid = store.context_for_key(key, name=name, actor=actor(ctx))
    print_json({"context_id": str(cid)}) if as_json else out.print(str(cid), highlight=False)
