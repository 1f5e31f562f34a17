"""The `ctxstore` command line: one Typer app, every command registered here, explicitly,
in the order `--help` lists them; the global options travel in Typer's context."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer
import typer.core

from ctxstore.adapters.cli import (
    admin,
    audit,
    calls,
    commands,
    keys,
    mcp,
    reads,
    retention,
    search,
    shards,
    streams,
    transfer,
)
from ctxstore.adapters.cli.common import Options
from ctxstore.adapters.cli.keys import keys_app
from ctxstore.adapters.cli.tokens import token_app

# Typer labels every flag's type `<bool>` in the help; a flag takes no value, so it shows
# none (the one place its help is drawn, for every command).
_option_type = typer.core.TyperOption.display_type_rich


def _flag_without_type(self: typer.core.TyperOption, ctx: Any) -> str | None:
    return None if self.is_flag else _option_type(self, ctx)


typer.core.TyperOption.display_type_rich = _flag_without_type  # type: ignore[method-assign]

app = typer.Typer(
    name="ctxstore",
    help="Event-sourced store for LLM conversation context.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion (bash, zsh, fish, ...)
    pretty_exceptions_enable=False,
)

COMMANDS = (
    (commands.create, "create"),
    (commands.contexts, "contexts"),
    (commands.insert, "insert"),
    (commands.delete, "delete"),
    (commands.replace, "replace"),
    (commands.compress, "compress"),
    (commands.expand, "expand"),
    (commands.batch_start, "batch-start"),
    (commands.batch_end, "batch-end"),
    (streams.stream, "stream"),
    (streams.begin, "begin"),
    (streams.append, "append"),
    (streams.finish, "finish"),
    (streams.abandon, "abandon"),
    (streams.tail, "tail"),
    (reads.show, "show"),
    (reads.log, "log"),
    (reads.prompt, "prompt"),
    (commands.usage, "usage"),
    (commands.record_response, "record-response"),
    (commands.record_call, "record-call"),
    (commands.usage_report, "usage-report"),
    (commands.compact, "compact"),
    (reads.batches, "batches"),
    (reads.tokens, "tokens"),
    (reads.key, "key"),
    (commands.demo, "demo"),
    (audit.audit, "audit"),
    (audit.diff, "diff"),
    (audit.replay, "replay"),
    (calls.calls, "calls"),
    (calls.call, "call"),
    (transfer.fork, "fork"),
    (transfer.export, "export"),
    (transfer.import_, "import"),
    (audit.verify, "verify"),
    (audit.erase, "erase"),
    (audit.erasures, "erasures"),
    (search.search, "search"),
    (audit.reindex, "reindex"),
    (admin.serve, "serve"),
    (mcp.mcp, "mcp"),
    (admin.keygen, "keygen"),
    (keys.encrypt, "encrypt"),
    (retention.sweep, "sweep"),
    (retention.sweeps, "sweeps"),
    (admin.migrate, "migrate"),
    (shards.shards, "shards"),
    (shards.move, "move"),
)


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            print(f"ctxstore {version('ctxstore')}")
        except PackageNotFoundError:  # run from a checkout that was never installed
            print("ctxstore (not installed)")
        raise typer.Exit()


@app.callback()
def main_options(
    ctx: typer.Context,
    url: Annotated[
        str | None,
        typer.Option(help="Store URL (default: CTXSTORE_URL, else the embedded SQLite file)."),
    ] = None,
    actor: Annotated[
        str | None, typer.Option(help="Who runs the commands (default: CTXSTORE_ACTOR).")
    ] = None,
    version: Annotated[
        bool,
        typer.Option(
            "--version", is_eager=True, callback=_print_version, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """ctxstore: every change to an LLM context is an event; replay, roll back, audit."""
    ctx.obj = Options(url=url, actor=actor)


# `ctxstore call CONTEXT -1`: a negative number is the argument, not an unknown option.
NEGATIVE_ARGUMENTS = {"call"}

for command, name in COMMANDS:
    settings = {"ignore_unknown_options": True} if name in NEGATIVE_ARGUMENTS else None
    app.command(name, context_settings=settings)(command)
app.add_typer(keys_app, name="keys")
app.add_typer(token_app, name="token")
app.add_typer(retention.retention_app, name="retention")


GLOBAL_OPTIONS = ("--url", "--actor")  # options of `ctxstore` itself, before the command


def misplaced_global(args: list[str]) -> tuple[str, str] | None:
    """(the global option given after the command, the command), if one was
    (`ctxstore show X --actor ops`)."""
    at = 0
    while at < len(args) and args[at].startswith("-"):  # ctxstore's own options
        at += 1 if "=" in args[at] or args[at] not in GLOBAL_OPTIONS else 2
    for arg in args[at + 1 :]:
        name = arg.split("=", 1)[0]
        if name in GLOBAL_OPTIONS:
            return name, args[at]
    return None


def main() -> None:
    """Console entry point."""
    args = sys.argv[1:]
    misplaced = misplaced_global(args)
    if misplaced is not None:
        option, command = misplaced
        sys.stderr.write(
            f"error: {option} is an option of ctxstore itself: give it before the command "
            f"(ctxstore {option} ... {command} ...)\n"
        )
        raise SystemExit(2)
    app()
