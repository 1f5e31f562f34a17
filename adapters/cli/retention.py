"""`ctxstore retention set|list`, `ctxstore sweep`, `ctxstore sweeps`: contexts expire after
a period without writes (adapters/store/retention.py)."""

from __future__ import annotations

import re

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
from ctxstore.adapters.store.retention import RetentionPolicy

retention_app = typer.Typer(
    help="Retention policies: contexts expire after a period without writes.",
    no_args_is_help=True,
)
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def seconds(text: str) -> float | None:
    """A duration: 3600, 90m, 12h, 30d, 2w; `none` removes the policy."""
    if text.strip().lower() == "none":
        return None
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", text.lower())
    if m is None:
        raise typer.BadParameter(f"{text!r} is not a duration (3600, 90m, 12h, 30d, 2w, none)")
    return float(m.group(1)) * UNITS[m.group(2) or "s"]


@retention_app.command("set")
@handles_errors
def set_(
    ctx: typer.Context,
    expire_after: str = typer.Option(
        "none", help="No writes for this long expires a context: 30d, 12h, 3600, or none."
    ),
    keep_latest: int | None = typer.Option(
        None, min=1, help="Keep only each context's latest N events (older ones removed)."
    ),
    tenant: str | None = typer.Option(None, help="Every context of this tenant ('' for none)."),
    context: str | None = typer.Option(None, help="One context."),
    all_: bool = typer.Option(False, "--all", help="Every context of the store."),
    as_json: JsonFlag = False,
) -> None:
    """Set a retention policy (neither --expire-after nor --keep-latest: remove it); the
    most specific applies."""
    after = seconds(expire_after)
    with open_store(ctx) as store:
        found = store.admin.set_retention(
            after, keep_latest=keep_latest, tenant=tenant, context_id=context,
            everything=all_, actor=actor(ctx),
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
        said.append(f"expire after {policy.expire_after:g} s without writes")
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
def sweep(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """Erase every context its retention policy has expired (each leaves an erasure record);
    the sweep itself is recorded."""
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
