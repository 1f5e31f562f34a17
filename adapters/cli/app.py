"""The `ctxstore` command line: one Typer app, every command registered here, explicitly,
in the order `--help` lists them; the global options travel in Typer's context."""

from __future__ import annotations

import os
import sys
from importlib import import_module
from typing import Annotated, Any

import typer
import typer.core

from ctxstore.adapters.cli.common import Options

# Typer labels every flag's type `<bool>` in the help; a flag takes no value, so it shows
# none (the one place its help is drawn, for every command).
_option_type = typer.core.TyperOption.display_type_rich


def _flag_without_type(self: typer.core.TyperOption, ctx: Any) -> str | None:
    return None if self.is_flag else _option_type(self, ctx)


typer.core.TyperOption.display_type_rich = _flag_without_type  # type: ignore[method-assign]

# Every command: (module.function under adapters/cli, its name). A module is imported only
# when its command is built: running one command builds that one alone (see main), so it
# loads neither the others' modules nor their options.
COMMANDS = (
    ("commands.create", "create"),
    ("commands.contexts", "contexts"),
    ("commands.insert", "insert"),
    ("commands.delete", "delete"),
    ("commands.replace", "replace"),
    ("commands.compress", "compress"),
    ("commands.expand", "expand"),
    ("commands.batch_start", "batch-start"),
    ("commands.batch_end", "batch-end"),
    ("streams.stream", "stream"),
    ("streams.begin", "begin"),
    ("streams.append", "append"),
    ("streams.finish", "finish"),
    ("streams.abandon", "abandon"),
    ("streams.tail", "tail"),
    ("reads.show", "show"),
    ("reads.log", "log"),
    ("reads.prompt", "prompt"),
    ("commands.usage", "usage"),
    ("commands.record_response", "record-response"),
    ("commands.record_call", "record-call"),
    ("commands.usage_report", "usage-report"),
    ("commands.compact", "compact"),
    ("reads.batches", "batches"),
    ("reads.tokens", "tokens"),
    ("reads.key", "key"),
    ("commands.demo", "demo"),
    ("audit.audit", "audit"),
    ("audit.diff", "diff"),
    ("audit.replay", "replay"),
    ("calls.calls", "calls"),
    ("calls.call", "call"),
    ("transfer.fork", "fork"),
    ("transfer.export", "export"),
    ("transfer.import_", "import"),
    ("audit.verify", "verify"),
    ("audit.erase", "erase"),
    ("audit.erasures", "erasures"),
    ("search.search", "search"),
    ("audit.reindex", "reindex"),
    ("admin.serve", "serve"),
    ("mcp.mcp", "mcp"),
    ("admin.keygen", "keygen"),
    ("keys.encrypt", "encrypt"),
    ("retention.sweep", "sweep"),
    ("retention.sweeps", "sweeps"),
    ("admin.migrate", "migrate"),
    ("shards.shards", "shards"),
    ("shards.move", "move"),
)
# The command groups: (module.Typer, its name).
GROUPS = (
    ("keys.keys_app", "keys"),
    ("tokens.token_app", "token"),
    ("retention.retention_app", "retention"),
)

# What each command is for, in the order `--help` lists them (a panel each) and the
# reference page (docs/reference/cli.md, a section each, with an example).
PURPOSES: dict[str, tuple[str, ...]] = {
    "Contexts": (
        "create", "contexts", "key", "insert", "delete", "replace", "compress", "expand",
        "compact", "batch-start", "batch-end", "batches", "fork", "show", "prompt", "tokens",
    ),
    "Streaming replies": ("stream", "begin", "append", "finish", "abandon", "tail"),
    "Model calls and usage": (
        "record-response", "record-call", "usage", "calls", "call", "usage-report",
    ),
    "Debugging": ("log", "diff", "replay", "audit", "search", "demo"),
    "Data and retention": (
        "export", "import", "erase", "erasures", "retention", "sweep", "sweeps",
    ),
    "Operations": ("serve", "mcp", "migrate", "verify", "reindex", "shards", "move", "token"),
    "Keys": ("keygen", "encrypt", "keys"),
}  # fmt: skip


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            print(f"ctxstore {version('ctxstore')}")
        except PackageNotFoundError:  # run from a checkout that was never installed
            print("ctxstore (not installed)")
        raise typer.Exit()


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


def build_app(only: str | None = None) -> typer.Typer:
    """The app with every command, or with the one named `only` (what running it needs)."""
    built = typer.Typer(
        name="ctxstore",
        help="Event-sourced store for LLM conversation context.",
        no_args_is_help=True,
        add_completion=True,  # --install-completion / --show-completion (bash, zsh, ...)
        pretty_exceptions_enable=False,
    )
    built.callback()(main_options)
    commands = {name: where for where, name in COMMANDS}
    groups = {name: where for where, name in GROUPS}
    for purpose, names in PURPOSES.items():
        for name in names:
            if only not in (None, name):
                continue
            if name in groups:
                built.add_typer(_resolved(groups[name]), name=name, rich_help_panel=purpose)
                continue
            settings = {"ignore_unknown_options": True} if name in NEGATIVE_ARGUMENTS else None
            built.command(name, context_settings=settings, rich_help_panel=purpose)(
                _resolved(commands[name])
            )
    return built


def _resolved(where: str) -> Any:
    """`module.attribute` under adapters/cli, imported now."""
    module, attribute = where.rsplit(".", 1)
    return getattr(import_module(f"ctxstore.adapters.cli.{module}"), attribute)


_full: typer.Typer | None = None


def __getattr__(name: str) -> Any:
    """`app`: every command, built on first use (tests, docs, `--help`)."""
    global _full
    if name != "app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if _full is None:
        _full = build_app()
    return _full


GLOBAL_OPTIONS = ("--url", "--actor")  # options of `ctxstore` itself, before the command


def misplaced_global(args: list[str]) -> tuple[str, str] | None:
    """(the global option given after the command, the command), if one was
    (`ctxstore show X --actor ops`)."""
    at = _command_at(args)
    for arg in args[at + 1 :]:
        name = arg.split("=", 1)[0]
        if name in GLOBAL_OPTIONS:
            return name, args[at]
    return None


def _command_at(args: list[str]) -> int:
    """Where the command is in the arguments: after ctxstore's own options (else the end)."""
    at = 0
    while at < len(args) and args[at].startswith("-"):
        at += 1 if "=" in args[at] or args[at] not in GLOBAL_OPTIONS else 2
    return min(at, len(args))


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
    at = _command_at(args)
    named = args[at] if at < len(args) else None
    # Shell completion asks about every command; otherwise build only the one being run.
    completing = any(k.startswith("_") and k.endswith("_COMPLETE") for k in os.environ)
    known = {name for _, name in (*COMMANDS, *GROUPS)}
    build_app(None if completing or named not in known else named)()
