"""CLI commands for audit and debugging: audit, diff, replay, calls, fork, export, import, verify."""

from __future__ import annotations

import json
import re
import sys
import time
from contextlib import AbstractContextManager, nullcontext
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TextIO

import typer
from rich.panel import Panel
from rich.progress import Progress
from rich.table import Table

from ctxstore.adapters.cli.common import (
    JsonFlag,
    actor,
    err,
    event_summary,
    handles_errors,
    open_store,
    out,
    preview,
    print_json,
    render_visible,
    token_label,
)
from ctxstore.adapters.cli.terminal import json_shown, shown_text
from ctxstore.domain.errors import ConfigurationError, InvalidOperationError

if TYPE_CHECKING:  # annotations only: the command line starts without them
    from ctxstore.adapters.store.results import ReplayStep
    from ctxstore.domain.messages import Message
    from ctxstore.projections.audit import AuditEntry
    from ctxstore.projections.calls import PromptDiff
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
            cursor = page.cursor
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


def show_call(ctx: typer.Context, context: str, number: int, openai: bool, as_json: bool) -> None:
    """`show --call N`: exactly the messages a recorded model call sent."""
    with open_store(ctx) as store:
        call = store.call(context, number)
    messages = call.messages or []
    if as_json:
        if openai:
            print_json([m.to_openai() for m in messages])
        else:
            print_json(call.model_dump(mode="json", exclude_none=True))
        return
    title = (
        f"call #{call.number}: {call.model}, context version {call.for_version}, "
        f"provider {call.prompt_tokens} prompt tokens, ctxstore {call.counted_tokens}"
        + ("" if call.whole_context else " (a built prompt)")
    )
    out.print(message_table(title, messages))


@handles_errors
def calls(ctx: typer.Context, context: str, as_json: JsonFlag = False) -> None:
    """The model calls recorded against a context (see `show --call N`)."""
    with open_store(ctx) as store:
        found = store.calls(context)
    if as_json:
        print_json([c.model_dump(mode="json", exclude_none=True) for c in found])
        return
    table = Table(title="model calls")
    for col in ("#", "time", "model", "sent version", "in", "out", "ctxstore", "latency", "cost",
                "what"):  # fmt: skip
        table.add_column(col)
    for c in found:
        table.add_row(
            str(c.number), c.timestamp.isoformat(timespec="seconds"), c.model,
            str(c.for_version), str(c.prompt_tokens), str(c.completion_tokens),
            str(c.counted_tokens), latency_text(c.latency_ms),
            "" if c.cost is None else f"${c.cost:.6f}",
            "whole context" if c.whole_context else "built prompt",
        )  # fmt: skip
    out.print(table)


@handles_errors
def call(
    ctx: typer.Context,
    context: str,
    number: Annotated[int, typer.Argument(help="The call: 1 the first, -1 the last.")],
    diff: Annotated[
        bool, typer.Option("--diff", help="What changed in the prompt since the call before.")
    ] = False,
    shape: Annotated[
        str | None,
        typer.Option(help="Print only the prompt, as JSON in this shape: openai-chat, "
                     "openai-responses or anthropic (as you would send it again)."),
    ] = None,
    as_json: JsonFlag = False,
) -> None:  # fmt: skip
    """One recorded model call: exactly the prompt it sent, its response, and (--diff) what
    compaction, rollback or editing changed in the prompt since the call before."""
    from ctxstore.domain.shapes import FORMATS

    if shape is not None and shape not in FORMATS:
        raise InvalidOperationError(f"--shape must be one of {', '.join(FORMATS)}, not {shape!r}")
    with open_store(ctx) as store:
        found = store.call(context, number)
        changes = store.call_diff(context, found.number) if diff else None
    if shape is not None:
        from ctxstore.domain.conversions import convert

        print_json(convert(found.messages or [], shape).payload)
        return
    if as_json:
        shown = found.model_dump(mode="json", exclude_none=True)
        if changes is not None:
            shown["diff"] = changes.model_dump(mode="json")
        print_json(shown)
        return
    cost = "" if found.cost is None else f", ${found.cost:.6f}"
    if found.latency_ms is not None:
        cost += f", {latency_text(found.latency_ms)}"
    out.print(
        f"call #{found.number}: {found.model} at {found.timestamp.isoformat(timespec='seconds')}"
        f" by {found.actor}, context version {found.for_version}; tokens in "
        f"{found.prompt_tokens} (ctxstore {found.counted_tokens}), out "
        f"{found.completion_tokens}{cost}",
        highlight=False,
    )
    if changes is not None:
        out.print(prompt_changes(changes))
        return
    out.print(message_table("prompt" + (" (built)" if not found.whole_context else ""),
                            found.messages or []))  # fmt: skip
    out.print(message_table("response", found.response or []))


def latency_text(ms: float | None) -> str:
    if ms is None:
        return ""
    return f"{ms:.0f} ms" if ms < 10_000 else f"{ms / 1000:.1f} s"


def message_table(title: str, messages: list[Message]) -> Table:
    table = Table(title=title)
    for col in ("#", "id", "role", "content"):
        table.add_column(col, overflow="fold")
    for n, m in enumerate(messages):
        table.add_row(
            str(n), m.id or "", m.role, shown_text(preview(m.text()) or ", ".join(m.call_ids))
        )
    return table


def prompt_changes(changes: PromptDiff) -> Table:
    since = "the first call" if changes.previous is None else f"call #{changes.previous}"
    delta = changes.tokens_after - changes.tokens_before
    table = Table(
        title=f"prompt of call #{changes.number} against {since}: {len(changes.added)} added, "
        f"{len(changes.removed)} removed, {len(changes.changed)} changed, {changes.unchanged} "
        f"unchanged; tokens {changes.tokens_before} -> {changes.tokens_after} ({delta:+d})"
    )
    for col in ("", "id", "role", "content"):
        table.add_column(col, overflow="fold")
    for sign, found in (("+", changes.added), ("-", changes.removed), ("~", changes.changed)):
        for m in found:
            table.add_row(sign, m.id, m.role, shown_text(m.preview))
    return table


@handles_errors
def fork(
    ctx: typer.Context,
    context: str,
    at_version: Annotated[
        int | None, typer.Option(help="Copy the context as it was at this version.")
    ] = None,
    name: Annotated[str | None, typer.Option(help="Name of the new context.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """A new context starting as a copy of this one's visible context; prints its id."""
    with open_store(ctx) as store:
        new = store.fork(context, at_version=at_version, name=name, actor=actor(ctx))
    print_json({"context_id": str(new)}) if as_json else out.print(str(new), highlight=False)


@handles_errors
def export(
    ctx: typer.Context,
    context: str,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="File to write (default: stdout).")
    ] = None,
) -> None:
    """Write a context's events as JSON lines (import takes them back exactly)."""
    try:  # before anything is read: a wrong path is said at once
        sink: AbstractContextManager[TextIO] = (
            nullcontext(sys.stdout) if output is None else output.open("w", encoding="utf-8")
        )
    except OSError as exc:
        raise ConfigurationError(f"cannot write {output}: {exc.strerror or exc}") from None
    with open_store(ctx) as store, sink as f:
        for line in store.export_events(context):
            f.write(line + "\n")


def read_input(path: Path | None) -> str:
    if path is None or str(path) == "-":
        return sys.stdin.read()
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidOperationError(f"cannot read {path}: {exc}") from None


@handles_errors
def import_(
    ctx: typer.Context,
    path: Annotated[Path | None, typer.Argument(help="The file (default or -: stdin).")] = None,
    openai: Annotated[
        bool,
        typer.Option("--openai", help="The file is an OpenAI-format transcript (JSON or JSONL)."),
    ] = False,
    new_id: Annotated[
        bool, typer.Option("--new-id", help="Give an exported context a fresh id.")
    ] = False,
    name: Annotated[str | None, typer.Option(help="With --openai: the new context's name.")] = None,
    without_trailer: Annotated[
        bool,
        typer.Option(
            "--without-trailer", help="Accept an export without its trailer (older releases)."
        ),
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Import an export of `ctxstore export`, or (--openai) a transcript as a new context."""
    text = read_input(path)
    with open_store(ctx) as store, Progress(console=err, transient=True) as bar:
        task = bar.add_task("importing", total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        if openai:
            cid = store.import_transcript(text, name=name, actor=actor(ctx), progress=progress)
        else:
            cid = store.import_events(
                text.splitlines(), new_id=new_id, without_trailer=without_trailer,
                progress=progress,
            )  # fmt: skip
    print_json({"context_id": str(cid)}) if as_json else out.print(str(cid), highlight=False)


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


__all__ = ["render_change", "render_visible", "show_call"]


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
    out.print(table)


@handles_errors
def reindex(ctx: typer.Context) -> None:
    """Rebuild the audit index from the events (after it was damaged or edited)."""
    with open_store(ctx) as store:
        position = store.rebuild_audit_index()
    out.print(f"audit index rebuilt up to position {position}", highlight=False)
