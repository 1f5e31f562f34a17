"""CLI commands for audit and debugging: audit, diff, replay, verify, erase, erasures, reindex
(model calls: cli/calls.py; fork, export and import: cli/transfer.py)."""

from __future__ import annotations

import json
import re
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.panel import Panel
from rich.table import Table

from ctxstore.adapters.cli.common import (
    JsonFlag,
    actor,
    err,
    event_summary,
    handles_errors,
    open_store,
    out,
    print_json,
    print_table,
    render_visible,
    token_label,
)
from ctxstore.adapters.cli.terminal import json_shown, shown_text
from ctxstore.domain.errors import InvalidOperationError

if TYPE_CHECKING:  # annotations only: the command line starts without them
    from ctxstore.adapters.store.results import ReplayStep
    from ctxstore.projections.audit import AuditEntry
    from ctxstore.projections.changes import Change, Diff

RELATIVE = re.compile(r"^(\d+)\s*([smhd])$")
UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
BROKEN_EXIT = 6  # verify found a broken link


def parse_time(text: str | None, flag: str) -> datetime | None:
    """ISO 8601 with a zone (a missing zone means UTC), or an age such as 90s, 30m, 1h, 2d."""
    if text is None:
        return None
    m = RELATIVE.match(text.strip())
    if m:
        return datetime.now(UTC) - timedelta(**{UNITS[m.group(2)]: int(m.group(1))})
    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidOperationError(
            f"{flag} must be an ISO time or an age like 30m, 1h, 2d; got {text!r}"
        ) from None
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def render_change(c: Change) -> None:
    for mark, style, items in (
        ("+", "green", c.added),
        ("-", "red", c.removed),
        ("~", "yellow", c.changed),
    ):
        for m in items:
            line = f"  {mark} {m.id} {m.role} ({m.tokens} tokens) {m.preview}"
            out.print(shown_text(line, style=style))
    if not c.empty:
        out.print(f"  tokens {c.tokens_delta:+d}", style="dim", highlight=False)


def audit_table(entries: list[AuditEntry]) -> Table:
    table = Table(title="audit")
    for col in ("position", "time", "context", "v", "type", "actor", "batch", "what", "reverted"):
        table.add_column(col, overflow="fold")
    for e in entries:
        table.add_row(
            str(e.position),
            e.timestamp.isoformat(timespec="seconds"),
            str(e.context_id)[:8],
            str(e.version),
            e.type,
            e.actor,
            str(e.batch),
            shown_text(event_summary(e.type, e.message_ids, e.details)),
            f"by v{e.reverted_by}" if e.reverted else "",
            style="dim" if e.reverted else None,
        )
    return table


@handles_errors
def audit(
    ctx: typer.Context,
    since: Annotated[
        str | None, typer.Option(help="From this time (ISO 8601, or an age: 30m, 1h, 2d).")
    ] = None,
    until: Annotated[str | None, typer.Option(help="Before this time (same forms).")] = None,
    type_: Annotated[
        list[str] | None, typer.Option("--type", help="Only these event types.")
    ] = None,
    by: Annotated[str | None, typer.Option("--by", help="Only events of this actor.")] = None,
    context: Annotated[str | None, typer.Option(help="Only events of this context.")] = None,
    after: Annotated[int, typer.Option(help="Start after this position (a cursor).")] = 0,
    limit: Annotated[int, typer.Option(help="Events per page (at most 1000).")] = 100,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing new events as they are stored.")
    ] = False,
    interval: Annotated[float, typer.Option(help="Seconds between polls with --follow.")] = 1.0,
    as_json: JsonFlag = False,
) -> None:
    """Events across all contexts in the order recorded: who changed what, and when.

    With --json each event is one JSON line; the last line without --follow is
    {"cursor": N, "more": bool}: pass N to --after for the next page.
    """
    kwargs = {
        "since": parse_time(since, "--since"),
        "until": parse_time(until, "--until"),
        "types": type_ or None,
        "actor": by,
        "context_id": context,
        "limit": limit,
    }
    cursor = after
    with open_store(ctx) as store:
        while True:
            page = store.audit(after=cursor, **kwargs)  # type: ignore[arg-type]
            if as_json:
                for e in page.entries:
                    print(
                        json_shown(json.dumps(e.model_dump(mode="json"), ensure_ascii=False)),
                        flush=True,
                    )
            elif page.entries or not follow:
                out.print(audit_table(page.entries))
            cursor = int(page.cursor)  # one store's: a position
            if page.more:
                if not follow:
                    break
                continue
            if not follow:
                break
            time.sleep(interval)
    if as_json:
        print(json.dumps({"cursor": page.cursor, "more": page.more}))
    elif page.more:
        out.print(f"more: ctxstore audit --after {page.cursor} ...", style="dim", highlight=False)


@handles_errors
def diff(
    ctx: typer.Context,
    context: str,
    from_version: Annotated[int, typer.Argument(help="The earlier version.")],
    to_version: Annotated[int, typer.Argument(help="The later version.")],
    as_json: JsonFlag = False,
) -> None:
    """What changed in the visible context between two versions."""
    with open_store(ctx) as store:
        d = store.diff(context, from_version, to_version)
    if as_json:
        print_json(d.model_dump(mode="json", exclude_none=True))
        return
    render_diff(d)


def render_diff(d: Diff) -> None:
    out.print(
        f"context {d.context_id}: version {d.from_version} -> {d.to_version}, "
        f"tokens {d.tokens_before} -> {d.tokens_after} ({d.tokens_delta:+d})",
        highlight=False,
    )
    for m in d.removed:
        out.print(shown_text(f"- {m.id} {m.role} ({m.tokens}) {m.preview}", style="red"))
    for m in d.added:
        out.print(shown_text(f"+ {m.id} {m.role} ({m.tokens}) {m.preview}", style="green"))
    for before, after in d.changed:
        out.print(
            shown_text(f"~ {before.id} {before.role} ({before.tokens}) {before.preview}", "red")
        )
        out.print(
            shown_text(f"  {after.id} {after.role} ({after.tokens}) {after.preview}", "green")
        )
    if not (d.added or d.removed or d.changed):
        out.print("no difference in the visible messages", style="dim")


@handles_errors
def replay(
    ctx: typer.Context,
    context: str,
    from_version: Annotated[int, typer.Option("--from", help="First version to show.")] = 1,
    to: Annotated[int | None, typer.Option("--to", help="Last version to show.")] = None,
    step: Annotated[
        bool, typer.Option("--step", help="Wait for Enter after each event (q quits).")
    ] = False,
    full: Annotated[
        bool, typer.Option("--full", help="With --json: the whole visible context each line.")
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Walk a context's events one by one, with the visible context after each.

    --json prints one JSON line per event: the event, what it changed (the messages added
    or changed, in full with their positions; the ids removed), the visible context's
    version, batch, size and tokens after it, and the model calls that sent that version.
    Each line holds what its step changed, so the output grows with the history, not with
    history x context (--full adds the whole visible context to every line).
    """
    with open_store(ctx) as store:
        # (a version past the head is refused, as `show --at-version` and `diff` refuse it)
        steps = store.replay(context, from_version=from_version, to_version=to)
        for s in steps:
            if as_json:
                line = replay_line(s, full=full)
                print(json_shown(json.dumps(line, ensure_ascii=False)), flush=True)
                continue
            render_step(s)
            if step and sys.stdin.isatty() and input("Enter: next, q: quit ").strip() == "q":
                break


def replay_line(s: ReplayStep, *, full: bool) -> dict[str, Any]:
    """One replay step as a JSON line: the event and what it changed."""
    v, change = s.visible, s.event.changes
    event = s.event.model_dump(mode="json", exclude_none=True, exclude={"changes"})
    line: dict[str, Any] = {"event": event}
    if change is not None:
        touched = {b.id for b in change.added} | {b.id for b in change.changed}
        at = {m.id: n for n, m in enumerate(v.messages) if m.id in touched}
        by_id = {m.id: m for m in v.messages if m.id in touched}

        def placed(ids: list[str]) -> list[dict[str, Any]]:
            return [
                {"at": at[i], "tokens": v.token_counts.get(i),
                 "message": by_id[i].model_dump(mode="json", exclude_none=True)}
                for i in ids if i in by_id
            ]  # fmt: skip

        line["added"] = placed([b.id for b in change.added])
        line["changed"] = placed([b.id for b in change.changed])
        line["removed"] = [b.id for b in change.removed]
        line["tokens_delta"] = change.tokens_delta
    line["visible"] = (
        v.model_dump(mode="json", exclude_none=True)
        if full
        else {"version": v.version, "batch": v.batch, "messages": len(v.messages),
              "tokens": v.tokens, "estimated": v.estimated}
    )  # fmt: skip
    line["calls"] = s.calls
    return line


def render_step(s: ReplayStep) -> None:
    e, v = s.event, s.visible
    head = f"v{e.version} {e.type} by {e.actor}  batch {e.batch}  {e.timestamp:%Y-%m-%d %H:%M:%S}"
    if e.reverted:
        head += f"  (reverted by v{e.reverted_by})"
    if e.type == "usage":
        d = e.details
        head += f"  call #{d['call']} {d['model']} sent v{d['for_version']}"
    out.print(Panel(shown_text(head, style="dim" if e.reverted else "bold"), expand=False))
    if e.changes is not None:
        render_change(e.changes)
    if s.calls:
        out.print(f"  this version was sent in call(s) {s.calls}", style="cyan", highlight=False)
    out.print(
        f"  visible: {len(v.messages)} messages, {token_label(v.tokens, v.estimated)} tokens",
        highlight=False,
    )


@handles_errors
def verify(
    ctx: typer.Context,
    context: Annotated[str | None, typer.Argument(help="One context (default: all).")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Check the hash chains of stored events; exit 6 naming the first broken link."""
    with open_store(ctx) as store:
        result = store.verify(context)
    if as_json:
        print_json({**result.model_dump(mode="json"), "ok": result.ok})
    else:
        rate = result.events / result.seconds if result.seconds else 0.0
        out.print(
            f"{result.events} events in {result.contexts} context(s) checked "
            f"({rate:,.0f} events/s); {len(result.broken)} broken"
            + (f", {result.unchained} written before chaining" if result.unchained else ""),
            highlight=False,
        )
        for b in result.broken:
            out.print(
                shown_text(
                    f"BROKEN context {b.context_id} at version {b.version}: {b.reason}", "red"
                )
            )
    if not result.ok:
        raise typer.Exit(BROKEN_EXIT)


__all__ = ["render_change", "render_visible"]


@handles_errors
def erase(
    ctx: typer.Context,
    context: str,
    reason: Annotated[str, typer.Option(help="Why (kept in the erasure record).")],
    with_forks: Annotated[
        bool | None,
        typer.Option(
            "--with-forks/--keep-forks",
            help="Its forks hold copies of its messages: erase them too, or keep them.",
            show_default=False,
        ),
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask for confirmation.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Erase a context's contents for good (right to be forgotten); a record stays."""
    if not yes and not typer.confirm(f"Erase context {context} for good?"):
        raise typer.Exit(1)
    with open_store(ctx) as store:
        record = store.erase(context, reason=reason, actor=actor(ctx), with_forks=with_forks)
    if as_json:
        print_json(record.model_dump(mode="json"))
    else:
        out.print(
            f"erased {record.context_id}: {record.events} events, {record.snapshots} snapshots "
            f"deleted; recorded as erased by {record.actor} ({record.reason})",
            highlight=False,
        )
        for fork in record.forks:
            out.print(f"erased with it: fork {fork}", highlight=False)
        for left in record.residue:
            err.print(f"residue: {left}", highlight=False)


@handles_errors
def erasures(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """The erasure records: which context, by whom, why, when."""
    with open_store(ctx) as store:
        records = store.erasures()
    if as_json:
        for r in records:
            print_json(r.model_dump(mode="json"))
        return
    table = Table("erased at", "context", "tenant", "by", "reason", "events")
    for r in records:
        table.add_row(
            r.erased_at.isoformat(timespec="seconds"), str(r.context_id), r.tenant or "",
            r.actor, r.reason, str(r.events),
        )  # fmt: skip
    print_table(table, "no erasures")


@handles_errors
def reindex(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """Rebuild the audit and search indexes from the events (after damage or an edit)."""
    with open_store(ctx) as store:
        position, rows = store.admin.reindex()
    if as_json:
        print_json({"rebuilt_to": position, "search_rows": rows})
    else:
        out.print(
            f"audit index rebuilt up to position {position}; search index: {rows} message(s)",
            highlight=False,
        )
