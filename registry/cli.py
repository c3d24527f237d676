"""The `crashreg` command (contract: CONTRACT.md, "Command line")."""

from __future__ import annotations

from importlib.metadata import entry_points

import click

from registry.auth.commands import tokens
from registry.cli_support import cli_settings
from registry.epidemiology.commands import demo, epidemiology
from registry.rca.commands import rca, triage_bundle_command
from registry.signatures.commands import import_command, signature_command, signatures


@click.group()
@click.version_option(package_name="crashreg")
def main() -> None:
    """crashreg: historical crash registry for large Linux fleets."""


@main.group()
def db() -> None:
    """Schema migrations (Alembic)."""


@db.command("upgrade")
@click.argument("revision", default="head")
def db_upgrade(revision: str) -> None:
    """Apply migrations up to REVISION (default head): the release step."""
    from registry.migrate import upgrade

    upgrade(cli_settings().database_url, revision)
    click.echo(f"database at {revision}", err=True)


@db.command("downgrade")
@click.argument("revision")
def db_downgrade(revision: str) -> None:
    """Revert migrations down to REVISION (e.g. -1, base)."""
    from registry.migrate import downgrade

    downgrade(cli_settings().database_url, revision)


@db.command("current")
def db_current() -> None:
    """Show the database's revision and the code's head."""
    from registry.cli_support import cli_database
    from registry.migrate import current_revisions, head_revisions

    click.echo(f"current: {', '.join(sorted(current_revisions(cli_database().engine))) or 'none'}")
    click.echo(f"head:    {', '.join(sorted(head_revisions()))}")


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8080, show_default=True, type=int)
def serve(host: str, port: int) -> None:
    """Run the registry for development (production: gunicorn registry.wsgi:app)."""
    from registry.app import create_app

    app = create_app(cli_settings())
    click.echo(f"crashreg serving on http://{host}:{port} (database {cli_settings().database_url})", err=True)
    app.run(host=host, port=port, threaded=True)


main.add_command(tokens)
main.add_command(triage_bundle_command)
main.add_command(rca)
main.add_command(epidemiology)
main.add_command(demo)
main.add_command(signature_command)
main.add_command(signatures)
main.add_command(import_command)

# Integration commands (Jira, Grafana, the scheduler) live in sync/, which depends on registry,
# never the reverse: they plug in through the "crashreg.commands" entry points in pyproject.toml.
for _entry in entry_points(group="crashreg.commands"):
    main.add_command(_entry.load())
