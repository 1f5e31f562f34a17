"""`ctxstore keys status|rotate`: the store's keys (docs/explanation/security.md)."""

from __future__ import annotations

import typer

from ctxstore.adapters.cli.common import (
    JsonFlag,
    err,
    handles_errors,
    open_store,
    out,
    print_json,
)
from ctxstore.adapters.cli.progress import progress

keys_app = typer.Typer(
    help="Encryption keys: where they are, and KEK rotation.", no_args_is_help=True
)


@keys_app.command("status")
@handles_errors
def status(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """The current KEK, where data keys are kept, and how many each KEK wraps."""
    with open_store(ctx) as store:
        found = store.admin.key_status()
    if as_json:
        print_json(found.model_dump(mode="json"))
        return
    out.print(f"KEK in use: {found.kek}", highlight=False)
    out.print(f"data keys in {found.vault}", highlight=False)
    for kek, count in sorted(found.by_kek.items()):
        mark = " (current)" if kek == found.kek else " (old: rotate, then remove it)"
        out.print(f"  {count} wrapped by {kek}{mark}", highlight=False)


@keys_app.command("rotate")
@handles_errors
def rotate(
    ctx: typer.Context,
    batch: int = typer.Option(2000, min=1, help="Keys re-wrapped per transaction."),
    as_json: JsonFlag = False,
) -> None:
    """Re-wrap every data key under the current KEK (the first in CTXSTORE_KEY_FILE), online;
    run it again to resume. Then the old KEK can be removed from the file."""
    with open_store(ctx) as store, progress("re-wrapping data keys", "keys") as shown:
        found = store.admin.rotate_kek(
            batch=batch, progress=None if as_json else lambda done: shown(done, None)
        )
    if as_json:
        print_json(found.model_dump(mode="json"))
    else:
        rate = found.rewrapped / found.seconds if found.seconds else 0.0
        out.print(
            f"re-wrapped {found.rewrapped} data keys under {found.kek} in {found.seconds:.1f} s "
            f"({rate:,.0f}/s)",
            highlight=False,
        )
        if found.unopened:
            out.print(
                f"[red]{len(found.unopened)} keys are wrapped by a KEK this key file does not "
                "hold[/red]: add it (after the current one) and run again",
            )
        elif found.done:
            out.print("every data key is wrapped by the current KEK: older ones may be removed")
    if found.unopened:
        raise typer.Exit(1)


@keys_app.command("rekey")
@handles_errors
def rekey(
    ctx: typer.Context,
    context: str,
    wait: float | None = typer.Option(
        None, min=0, help="Seconds before the old key is dropped (default: the key cache's)."
    ),
    as_json: JsonFlag = False,
) -> None:
    """A new data key for one context: its events and snapshots sealed anew (the hash chain
    still verifies), the old key dropped."""
    with open_store(ctx) as store:
        pause = store.settings.key_cache_seconds if wait is None else wait
        if pause and not as_json:
            # Other processes may hold the old key in their caches for this long: the old
            # key is dropped only once none can still write with it.
            err.print(
                f"re-keying {context}: sealing it anew, then waiting {pause:g} s for other "
                "processes' cached keys to expire (CTXSTORE_KEY_CACHE_SECONDS; --wait 0 when "
                "no other process has this store open) ...",
                highlight=False,
            )
        with progress("waiting for cached keys to expire", "s") as shown:
            found = store.admin.rekey(context, wait=wait, waiting=None if as_json else shown)
    if as_json:
        print_json(found.model_dump(mode="json"))
        return
    out.print(
        f"re-keyed {context}: {found.events} events and {found.snapshots} snapshots sealed anew",
        highlight=False,
    )
    for left in found.residue:
        out.print(f"[yellow]residue:[/yellow] {left}", highlight=False)


@handles_errors
def encrypt(
    ctx: typer.Context,
    batch: int = typer.Option(500, min=1, help="Rows sealed per transaction."),
    as_json: JsonFlag = False,
) -> None:
    """Encrypt the store in place with the key in CTXSTORE_ENCRYPTION_KEY (or the key file):
    every event and snapshot sealed with its context's data key. Safe to stop (Ctrl-C, a
    kill) and run again; the store stays readable throughout."""
    with open_store(ctx) as store, progress("sealing contexts", "contexts") as shown:
        found = store.admin.encrypt_in_place(
            batch=batch, progress=None if as_json else lambda done: shown(done, None)
        )
    if as_json:
        print_json(found.model_dump(mode="json"))
        return
    out.print(
        f"sealed {found.events} events, {found.snapshots} snapshots and {found.attachments} "
        f"attachments of {found.contexts} contexts in {found.seconds:.1f} s",
        highlight=False,
    )
    for left in found.residue:
        out.print(f"[yellow]residue:[/yellow] {left}", highlight=False)
