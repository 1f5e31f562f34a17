"""Streamed replies on the command line: `stream` stores a reply from deltas on stdin as they
arrive (JSON lines: neutral deltas or a provider's stream events), finishing it at the end
of input and abandoning it on Ctrl-C; `begin`, `append`, `finish`, `abandon` are the steps;
`tail` follows a context live."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ctxstore.adapters.cli.common import (
    SHAPE_NAMES,
    ExpectedVersion,
    JsonFlag,
    actor,
    event_summary,
    handles_errors,
    json_option,
    open_store,
    out,
    parse_ref,
    preview,
    print_written,
)
from ctxstore.adapters.cli.terminal import shown_text
from ctxstore.domain.errors import InvalidOperationError

if TYPE_CHECKING:  # annotations only: the command line starts without them
    from ctxstore.adapters.store.results import TailEvent

MessageOption = Annotated[
    str | None, typer.Option("--message", help="How the reply starts (JSON); default: empty.")
]
FormatOption = Annotated[
    str | None,
    typer.Option("--format", help=f"Its shape: {SHAPE_NAMES}."),
]


def _deltas(line: str, n: int) -> Any:
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise InvalidOperationError(f"line {n}: not JSON ({exc.msg})") from None
    except RecursionError:
        raise InvalidOperationError(f"line {n}: JSON nested too deeply") from None


def _stdin_deltas() -> list[Any]:
    found: list[Any] = []
    for n, line in enumerate(sys.stdin, 1):
        if line.strip():
            value = _deltas(line, n)
            found.extend(value if isinstance(value, list) else [value])
    return found


@handles_errors
def stream(
    ctx: typer.Context,
    context: str,
    message: MessageOption = None,
    format: FormatOption = None,
    interval: Annotated[
        float, typer.Option(help="Write kept deltas once the oldest is this many seconds old.")
    ] = 0.25,
    as_json: JsonFlag = False,
) -> None:
    """Store a reply as it streams: deltas as JSON lines on stdin, written in batches;
    finished at the end of input, abandoned (kept, marked) on Ctrl-C."""
    from ctxstore.adapters.store import reply_stream  # (the store's modules load on use)

    with open_store(ctx) as store:
        reply = store.stream(
            context, json_option(message, "--message"), format=format,
            policy=reply_stream.StreamPolicy(interval=interval), actor=actor(ctx),
        )  # fmt: skip
        try:
            for n, line in enumerate(sys.stdin, 1):
                if line.strip():
                    value = _deltas(line, n)
                    reply.add(*(value if isinstance(value, list) else [value]))
        except KeyboardInterrupt:
            print_written(reply.abandon("interrupted"), as_json)
            raise typer.Exit(130) from None
        except BaseException:
            reply.abandon("the stream's input failed")
            raise
        print_written(reply.finish(), as_json)


@handles_errors
def begin(
    ctx: typer.Context,
    context: str,
    message: MessageOption = None,
    format: FormatOption = None,
    expected_version: ExpectedVersion = None,
    as_json: JsonFlag = False,
) -> None:
    """Start a reply that streams in (visible at once, marked incomplete); prints its id."""
    with open_store(ctx) as store:
        w = store.begin(
            context, json_option(message, "--message"), format=format, actor=actor(ctx),
            expected_version=expected_version,
        )  # fmt: skip
    print_written(w, as_json)


@handles_errors
def append(
    ctx: typer.Context,
    context: str,
    ref: Annotated[str, typer.Argument(help="The streaming reply's id or #position.")],
    expected_version: ExpectedVersion = None,
    as_json: JsonFlag = False,
) -> None:
    """Add the deltas on stdin (JSON lines) to a streaming reply, as one event."""
    deltas = _stdin_deltas()
    with open_store(ctx) as store:
        w = store.append(
            context, parse_ref(ref), deltas, actor=actor(ctx), expected_version=expected_version
        )
    print_written(w, as_json)


@handles_errors
def finish(
    ctx: typer.Context,
    context: str,
    ref: Annotated[str, typer.Argument(help="The streaming reply's id or #position.")],
    message: Annotated[
        str | None, typer.Option("--message", help="The reply as it finished (JSON).")
    ] = None,
    expected_version: ExpectedVersion = None,
    as_json: JsonFlag = False,
) -> None:
    """Complete a streaming reply, as it streamed or as --message."""
    with open_store(ctx) as store:
        w = store.finish(
            context, parse_ref(ref), json_option(message, "--message"), actor=actor(ctx),
            expected_version=expected_version,
        )  # fmt: skip
    print_written(w, as_json)


@handles_errors
def abandon(
    ctx: typer.Context,
    context: str,
    ref: Annotated[str, typer.Argument(help="The streaming reply's id or #position.")],
    reason: Annotated[str | None, typer.Option(help="Why it stopped.")] = None,
    hide: Annotated[bool, typer.Option("--hide", help="Hide it instead of keeping it.")] = False,
    expected_version: ExpectedVersion = None,
    as_json: JsonFlag = False,
) -> None:
    """Stop a streaming reply for good: kept as it stands (marked abandoned), or hidden."""
    with open_store(ctx) as store:
        w = store.abandon(
            context, parse_ref(ref), reason=reason, keep=not hide, actor=actor(ctx),
            expected_version=expected_version,
        )  # fmt: skip
    print_written(w, as_json)


@handles_errors
def tail(
    ctx: typer.Context,
    context: str,
    after: Annotated[
        int | None, typer.Option(help="Start after this version (0: from the first event).")
    ] = None,
    idle: Annotated[
        float | None, typer.Option(help="Stop after this many seconds without an event.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object a line.")] = False,
) -> None:
    """Follow a context live: each new event as it is written (Ctrl-C stops)."""
    with open_store(ctx) as store:
        try:
            for event in store.follow(context, after=after, idle=idle):
                if as_json:
                    print(event.model_dump_json(), flush=True)
                else:
                    out.print(shown_text(tail_line(event)), markup=False, highlight=False)
        except KeyboardInterrupt:
            raise typer.Exit(130) from None


def tail_line(event: TailEvent) -> str:
    """One event as `ctxstore tail` prints it: version, time, type, actor, what it did."""
    what = event.what or event_summary(event.type, event.message_ids, event.details)
    if event.type == "append":
        text = "".join(
            d.get("text", "") or d.get("reasoning", "") or d.get("call", {}).get("arguments", "")
            for d in event.payload.get("deltas", [])
        )
        what = f"{what} {preview(text, 60)!r}"
    stamp = event.timestamp.strftime("%H:%M:%S.%f")[:-3]
    return f"v{event.version:<6} {stamp} {event.type:<11} {event.actor:<12} {what}"
