"""crashreg tokens create | list | revoke."""

from __future__ import annotations

import click
from sqlalchemy import select

from registry.auth.models import ApiToken
from registry.auth.tokens import SCOPES, TOKEN_KINDS, create_token
from registry.cli_support import CliContext, pass_cli
from registry.db import utcnow


@click.group("tokens")
def tokens() -> None:
    """API tokens (only their hashes are stored)."""


@tokens.command("create")
@click.option("--name", required=True, help="who or what uses the token")
@click.option("--scope", required=True, type=click.Choice(SCOPES))
@click.option(
    "--kind",
    default="human",
    show_default=True,
    type=click.Choice(TOKEN_KINDS),
    help="agent tokens can propose RCAs but never review them",
)
@click.option(
    "--if-missing",
    is_flag=True,
    help="only when no active token has this name (prints nothing on stdout otherwise): `make run` uses it",
)
@pass_cli
def create(cli: CliContext, name: str, scope: str, kind: str, if_missing: bool) -> None:
    """Create a token and print it once; it cannot be shown again."""
    with cli.database().session() as session:
        existing = session.scalar(
            select(ApiToken.id).where(ApiToken.name == name, ApiToken.revoked_at.is_(None)).limit(1)
        ) if if_missing else None
        if existing is not None:
            click.echo(
                f"token {existing} '{name}' exists (its secret is not kept): make another with "
                f"`crashreg tokens create --name NAME --scope {scope}`",
                err=True,
            )
            return
        token, row = create_token(session, name, scope, kind)
    click.echo(token)
    click.echo(f"token {row.id} '{name}' ({scope}, {kind}) created; store it now, it is not kept", err=True)


@tokens.command("list")
@pass_cli
def list_tokens(cli: CliContext) -> None:
    """Tokens with their scope, kind and last use (never the token itself)."""
    with cli.database().session() as session:
        rows = session.scalars(select(ApiToken).order_by(ApiToken.id)).all()
    click.echo(f"{'id':>4}  {'name':24} {'scope':7} {'kind':6} {'prefix':9} {'last used':25} state")
    for row in rows:
        state = f"revoked {row.revoked_at:%Y-%m-%d}" if row.revoked_at else "active"
        last = row.last_used_at.isoformat(timespec="seconds") if row.last_used_at else "never"
        click.echo(
            f"{row.id:>4}  {row.name[:24]:24} {row.scope:7} {row.kind:6} crs_{row.prefix} {last:25} {state}"
        )


@tokens.command("revoke")
@click.argument("token_id", type=int)
@pass_cli
def revoke(cli: CliContext, token_id: int) -> None:
    """Revoke a token by id; requests with it get 401 from then on."""
    with cli.database().session() as session:
        row = session.get(ApiToken, token_id)
        if row is None:
            raise click.ClickException(f"no token {token_id}")
        if row.revoked_at is None:
            row.revoked_at = utcnow()
    click.echo(f"token {token_id} revoked")
