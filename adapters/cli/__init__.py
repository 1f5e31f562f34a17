"""The command line, `ctxstore ...`: one Typer app, its commands registered explicitly."""

from __future__ import annotations


def main() -> None:
    """Run the command line (the `ctxstore` script)."""
    from ctxstore.adapters.cli.app import main as run

    run()
