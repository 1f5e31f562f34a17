"""`ctxstore retention set|remove|list`, `ctxstore sweep`, `ctxstore sweeps`: contexts expire
after a period without writes or keep only their latest events (adapters/store/retention.py)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

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
    from ctxstore.adapters.store.retention import RetentionPlan, RetentionPolicy


@retention_app.command("set")
@handles_errors
def set_(
    ctx: typer.Context,
    expire_after: str | None = typer.Option(
        None,
        help="No writes for this long expires a context: 30d, 12h, 90m, 2w (a unit is "
        "required), or none to drop the expiry. Not given: the scope's expiry stays.",
    ),
    keep_latest: int | None = typer.Option(
        None,
        min=1,
        help="Keep only each context's latest N events (older ones removed). "
        "Not given: the scope's bound stays.",
    ),
    keep_all: bool = typer.Option(False, "--keep-all", help="Drop the scope's bound."),
    tenant: str | None = typer.Option(None, help="Every context of this tenant ('' for none)."),
    context: str | None = typer.Option(None, help="One context."),
    all_: bool = typer.Option(False, "--all", help="Every context of the store."),
    force: bool = typer.Option(False, "--force", help="Allow an expiry under an hour."),
    yes: bool = typer.Option(
        False,
        "--yes",
        help="Do not ask before a policy under which the next sweep removes anything.",
    ),
    as_json: JsonFlag = False,
) -> None:
    """Set a scope's retention policy: what is not given stays as it was; one left with
    neither an expiry nor a bound is removed (so is one by `retention remove`); the most
    specific scope applies. When the next sweep would
    remove anything under it, lists what per context and asks first (--yes for scripts)."""
    _one_scope(tenant, context, all_)
    if expire_after is None and keep_latest is None and not keep_all:
        raise typer.BadParameter(
            "give --expire-after, --keep-latest or --keep-all (`ctxstore retention remove` "
            "drops a policy)"
        )
    if keep_all and keep_latest is not None:
        raise typer.BadParameter("--keep-latest and --keep-all contradict each other")
    after: float | None = None
    if expire_after is not None:
        try:
            after = parse_duration(expire_after, "--expire-after")
        except InvalidOperationError as exc:
            raise typer.BadParameter(str(exc).removeprefix("--expire-after: ")) from None
        check_expiry(after, force)
    with open_store(ctx) as store:
        admin = store.admin
        where: dict[str, Any] = {"tenant": tenant, "context_id": context, "everything": all_}
        current = admin.retention_policy(**where)
        if expire_after is None:
            after = None if current is None else current.expire_after
        keep = None if keep_all else keep_latest
        if keep_latest is None and not keep_all and current is not None:
            keep = current.keep_latest
        if not yes:
            _confirm(admin.retention_preview(after, keep_latest=keep, **where))
        found = admin.set_retention(
            after, keep_latest=keep, actor=actor(ctx), force=force, yes=True, **where
        )
    if as_json:
        print_json(None if found is None else found.model_dump(mode="json"))
        return
    if found is None:  # neither an expiry nor a bound is left
        out.print("policy removed", highlight=False)
    else:
        out.print(f"{found.scope}: {_policy_text(found)}", highlight=False)
    if current is not None:
        out.print(f"  (was: {_policy_text(current)})", highlight=False)


@retention_app.command("remove")
@handles_errors
def remove(
    ctx: typer.Context,
    tenant: str | None = typer.Option(None, help="The tenant's policy ('' for none)."),
    context: str | None = typer.Option(None, help="One context's policy."),
    all_: bool = typer.Option(False, "--all", help="The store's policy."),
    as_json: JsonFlag = False,
) -> None:
    """Drop a scope's retention policy (a less specific one may then apply)."""
    scope = _one_scope(tenant, context, all_)
    with open_store(ctx) as store:
        where: dict[str, Any] = {"tenant": tenant, "context_id": context, "everything": all_}
        current = store.admin.retention_policy(**where)
        store.admin.set_retention(None, actor=actor(ctx), **where)
    if as_json:
        print_json({"removed": None if current is None else current.model_dump(mode="json")})
    elif current is None:
        out.print(
            f"no policy was set for {scope} {context or tenant or ''}".rstrip(), highlight=False
        )
    else:
        out.print(f"removed {current.scope}: {_policy_text(current)}", highlight=False)


def _one_scope(tenant: str | None, context: str | None, all_: bool) -> str:
    """The scope named on the command line: exactly one of its three options."""
    named = [n for n, given in (("--context", context is not None),
             ("--tenant", tenant is not None), ("--all", all_)) if given]  # fmt: skip
    if len(named) != 1:
        said = "none" if not named else " and ".join(named)
        raise typer.BadParameter(
            f"name exactly one scope: --context ID (one context), --tenant NAME (a tenant's "
            f"contexts) or --all (every context); got {said}"
        )
    return "context" if context is not None else "tenant" if tenant is not None else "store"


def _confirm(plan: RetentionPlan) -> None:
    """Ask before a policy under which the next sweep removes anything (refuse without a
    terminal): every context named, with what goes."""
    if plan.empty():
        return
    said = (
        f"under this policy the next sweep (`ctxstore serve` sweeps every minute) would "
        f"{plan.summary()}, for good:"
    )
    err.print(said, highlight=False)
    for line in plan.lines():
        err.print(f"  {line}", highlight=False)
    if not sys.stdin.isatty():
        raise InvalidOperationError(
            f"not set: the next sweep would {plan.summary()}; pass --yes to set it anyway"
        )
    if not typer.confirm("Set the policy?"):
        raise typer.Exit(1)


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
        False,
        "--dry-run",
        help="List, per context, what a sweep would erase or bound; remove nothing.",
    ),
    as_json: JsonFlag = False,
) -> None:
    """Erase every context its retention policy has expired (each leaves an erasure record)
    and bound the histories that keep only their latest events; the sweep is recorded."""
    if dry_run:
        with open_store(ctx) as store:
            plan = store.admin.sweep_plan()
        if as_json:
            print_json({
                "would_erase": [str(e.context_id) for e in plan.expire],
                "would_bound": [b.model_dump(mode="json") for b in plan.bound],
                "plan": plan.model_dump(mode="json"),
            })  # fmt: skip
            return
        out.print(f"a sweep now would {plan.summary()}", highlight=False)
        for line in plan.lines():
            out.print(f"  would {line}", highlight=False)
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
