"""`ctxstore token create|revoke|list`: bearer tokens kept hashed in the store's database."""

from __future__ import annotations

from datetime import UTC, datetime

import typer

from ctxstore.adapters.cli.common import (
    JsonFlag,
    err,
    handles_errors,
    open_store,
    out,
    print_json,
)

token_app = typer.Typer(
    help="Bearer tokens for `ctxstore serve`, kept hashed in the store.", no_args_is_help=True
)


@token_app.command("create")
@handles_errors
def create(
    ctx: typer.Context,
    tenant: str = typer.Option(..., help="The tenant the token acts for."),
    scopes: str = typer.Option("read,write", help="Comma-separated: read, write, audit, admin."),
    name: str | None = typer.Option(None, help="A label for lists."),
    as_json: JsonFlag = False,
) -> None:
    """Make a token; its text is printed once (only its hash is kept)."""
    with open_store(ctx) as store:
        token, found = store.admin.create_token(tenant, scopes, name=name)
    if as_json:
        print_json({"token": token, **found.model_dump(mode="json")})
        return
    print(token)
    err.print(
        f"token {found.id} for tenant {found.tenant}: {', '.join(found.scopes)} "
        "(shown once: keep it)",
        highlight=False,
    )


@token_app.command("revoke")
@handles_errors
def revoke(ctx: typer.Context, token_id: str, as_json: JsonFlag = False) -> None:
    """Revoke a token by its id (every service instance refuses it within 5 s)."""
    with open_store(ctx) as store:
        found = store.admin.revoke_token(token_id)
    if as_json:
        print_json(found.model_dump(mode="json"))
    else:
        out.print(f"revoked {found.id} (tenant {found.tenant})", highlight=False)


@token_app.command("list")
@handles_errors
def list_(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """The tokens kept in the store (never their secrets)."""
    with open_store(ctx) as store:
        found = store.admin.tokens()
    if as_json:
        print_json([t.model_dump(mode="json") for t in found])
        return
    for t in found:
        made = datetime.fromtimestamp(t.created, UTC).strftime("%Y-%m-%d %H:%M")
        state = "revoked" if t.revoked is not None else "active"
        label = f" {t.name}" if t.name else ""
        out.print(
            f"{t.id}  {t.tenant}  {','.join(t.scopes)}  {made}  {state}{label}", highlight=False
        )
