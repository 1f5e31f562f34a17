"""`ctxstore retention set|list`, `ctxstore sweep`, `ctxstore sweeps`: contexts expire after
a period without writes (adapters/store/retention.py)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import typer

from ctxstore.adapters.cli.common import (
    JsonFlag,
    actor,
    err,
    handles_errors,
    open_store,
    out,
    print_json,
)
from ctxstore.domain.durations import check_expiry, human, parse_duration
from ctxstore.domain.errors import InvalidOperationError

retention_app = typer.Typer(
    help="Retention policies: contexts expire after a period without writes.",
    no_args_is_help=True,
)

if TYPE_CHECKING:  # (the store's modules load when a command runs: --help stays quick)
    from ctxstore.adapters.store.retention import RetentionPolicy


@retention_app.command("set")
@handles_errors
def set_(
    ctx: typer.Context,
    expire_after: str = typer.Option(
        "none",
        help="No writes for this long expires a context: 30d, 12h, 90m, 2w, or none "
        "(a unit is required).",
    ),
    keep_latest: int | None = typer.Option(
        None, min=1, help="Keep only each context's latest N events (older ones removed)."
    ),
    tenant: str | None = typer.Option(None, help="Every context of this tenant ('' for none)."),
    context: str | None = typer.Option(None, help="One context."),
    all_: bool = typer.Option(False, "--all", help="Every context of the store."),
    force: bool = typer.Option(False, "--force", help="Allow an expiry under an hour."),
    yes: bool = typer.Option(False, "--yes", help="Do not ask before a policy that erases now."),
    as_json: JsonFlag = False,
) -> None:
    """Set a retention policy (neither --expire-after nor --keep-latest: remove it); the
    most specific applies. Says how many contexts the next sweep would erase under it, and
    asks first when that is any."""
    try:
        after = parse_duration(expire_after, "--expire-after")
    except InvalidOperationError as exc:
        raise typer.BadParameter(str(exc).removeprefix("--expire-after: ")) from None
    check_expiry(after, force)
    with open_store(ctx) as store:
        if after is not None:
            doomed = store.admin.would_expire(
                after, tenant=tenant, context_id=context, everything=all_
            )
            if doomed and not yes:
                said = (
                    f"{len(doomed)} context(s) have had no writes for {human(after)}: the next "
                    "sweep (`ctxstore serve` sweeps every minute) erases them for good"
                )
                if not sys.stdin.isatty():
                    raise InvalidOperationError(f"{said}; pass --yes to set the policy anyway")
                if not typer.confirm(f"{said}. Set the policy?"):
                    raise typer.Exit(1)
        found = store.admin.set_retention(
            after, keep_latest=keep_latest, tenant=tenant, context_id=context,
            everything=all_, actor=actor(ctx), force=force,
        )  # fmt: skip
    if as_json:
        print_json(None if found is None else found.model_dump(mode="json"))
    elif found is None:
        out.print("policy removed", highlight=False)
    else:
        out.print(f"{found.scope}: {_policy_text(found)}", highlight=False)


def _policy_text(policy: RetentionPolicy) -> str:
    said = []
    if policy.expire_after is not None:
        said.append(f"expire after {human(policy.expire_after)} without writes")
    if policy.keep_latest is not None:
        said.append(f"keep the latest {policy.keep_latest} events")
    return "; ".join(said)


@retention_app.command("list")
@handles_errors
def list_(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """The retention policies."""
    with open_store(ctx) as store:
        found = store.admin.retention_policies()
    if as_json:
        print_json([p.model_dump(mode="json") for p in found])
        return
    for p in found:
        out.print(
            f"{p.scope}: {_policy_text(p)} (set by {p.actor} {p.set_at:%Y-%m-%d %H:%M})",
            highlight=False,
        )


@handles_errors
def sweep(
    ctx: typer.Context,
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Name what would be erased; erase nothing."
    ),
    as_json: JsonFlag = False,
) -> None:
    """Erase every context its retention policy has expired (each leaves an erasure record);
    the sweep itself is recorded."""
    if dry_run:
        with open_store(ctx) as store:
            planned = store.admin.sweep_plan()
        if as_json:
            print_json({"would_erase": [str(c) for c in planned]})
            return
        out.print(f"a sweep now would erase {len(planned)} context(s)", highlight=False)
        for cid in planned:
            out.print(f"  would erase {cid}", highlight=False)
        return
    with open_store(ctx) as store:
        found = store.admin.sweep(actor=actor(ctx))
    if as_json:
        print_json(found.model_dump(mode="json"))
        return
    out.print(
        f"sweep {found.id}: {len(found.expired)} context(s) expired and erased, "
        f"{len(found.trimmed)} bounded ({sum(found.trimmed.values())} events removed)",
        highlight=False,
    )
    for cid in found.expired:
        out.print(f"  erased {cid}", highlight=False)
    for failed, why in found.failed.items():
        err.print(f"[yellow]not erased[/yellow] {failed}: {why}", highlight=False)
    if found.failed:
        raise typer.Exit(1)


@handles_errors
def sweeps(
    ctx: typer.Context, limit: int = typer.Option(20, min=1), as_json: JsonFlag = False
) -> None:
    """The recorded sweeps, newest first."""
    with open_store(ctx) as store:
        found = store.admin.sweeps(limit=limit)
    if as_json:
        print_json([s.model_dump(mode="json") for s in found])
        return
    for s in found:
        out.print(
            f"{s.started:%Y-%m-%d %H:%M:%S} {s.id} by {s.actor}: {len(s.expired)} expired",
            highlight=False,
        )
