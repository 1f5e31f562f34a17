"""CLI commands that take a context out or bring one in: fork, export, import."""

from __future__ import annotations

import sys
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Annotated, TextIO

import typer
from rich.progress import Progress

from ctxstore.adapters.cli.common import (
    JsonFlag,
    actor,
    err,
    handles_errors,
    open_store,
    out,
    print_json,
)
from ctxstore.domain.errors import ConfigurationError, InvalidOperationError


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
    as_json: JsonFlag = False,
) -> None:
    """Write a context's events as JSON lines (import takes them back exactly). The lines
    are JSON already; with --json and --output, what was written is said as JSON."""
    try:  # before anything is read: a wrong path is said at once
        sink: AbstractContextManager[TextIO] = (
            nullcontext(sys.stdout) if output is None else output.open("w", encoding="utf-8")
        )
    except OSError as exc:
        raise ConfigurationError(f"cannot write {output}: {exc.strerror or exc}") from None
    lines = 0
    with open_store(ctx) as store, sink as f:
        for line in store.export_events(context):
            f.write(line + "\n")
            lines += 1
    if output is not None and as_json:
        print_json({"context": context, "output": str(output), "lines": lines})
    elif output is not None:
        err.print(f"wrote {lines} lines to {output}", highlight=False)


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
    # A bar only on a terminal: elsewhere it would leave an empty line before an error.
    shown = Progress(console=err, transient=True) if err.is_terminal else None
    with open_store(ctx) as store, shown or nullcontext():
        task = shown.add_task("importing", total=None) if shown is not None else None

        def progress(done: int, total: int) -> None:
            if shown is not None and task is not None:
                shown.update(task, completed=done, total=total)

        if openai:
            cid = store.import_transcript(text, name=name, actor=actor(ctx), progress=progress)
        else:
            cid = store.import_events(
                text.splitlines(), new_id=new_id, without_trailer=without_trailer,
                progress=progress,
            )  # fmt: skip
    print_json({"context_id": str(cid)}) if as_json else out.print(str(cid), highlight=False)
