"""`crashreg grafana provision [--force]` and `crashreg grafana export DIR`."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from dashboards import build_dashboards
from registry.cli_support import cli_database, cli_settings
from sync.grafana.datasource import datasource_spec, dialect_name
from sync.grafana.export import DEFAULT_GRAFANA_PROVISIONING, PASSWORD_ENV, export
from sync.grafana.provision import Outcome
from sync.grafana.role import RoleError
from sync.grafana.rollups import refresh_reporting_copy, reporting_copy_path
from sync.grafana.service import GrafanaNotConfigured, check_configured, provision


@click.group()
def grafana() -> None:
    """Grafana: read-only role, data source, dashboards."""


@grafana.command("provision")
@click.option("--force", is_flag=True, help="Overwrite dashboards edited in Grafana.")
def provision_command(force: bool) -> None:
    """Create or check the read-only role; provision folder, data source and dashboards."""

    def progress(outcome: Outcome) -> None:
        click.echo(outcome.line())

    try:
        check_configured(cli_settings())  # a missing setting is said before the database is opened
        result = provision(cli_settings(), cli_database(), force=force, progress=progress)
    except (GrafanaNotConfigured, RoleError) as error:
        raise click.ClickException(str(error)) from error
    if result.role is not None:
        role = result.role
        click.echo(
            f"role {role.role}: {'created' if role.created else 'checked'}; "
            f"granted {len(role.granted)} view(s), revoked {len(role.revoked)} relation(s)"
        )
        for problem in role.problems:
            click.echo(f"role problem: {problem}", err=True)
    kept = result.report.by_action("kept-edited") + result.report.by_action("conflict")
    if kept:
        click.echo(f"{len(kept)} dashboard(s) not overwritten; rerun with --force to replace them", err=True)
    if (result.role and not result.role.ok) or kept:
        sys.exit(2)


@grafana.command("export")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--grafana-provisioning",
    default=DEFAULT_GRAFANA_PROVISIONING,
    show_default=True,
    help="Where Grafana will read the provisioning files (the dashboard provider's path).",
)
def export_command(directory: Path, grafana_provisioning: str) -> None:
    """Write Grafana's file-provisioning layout (data source, dashboard provider, JSON)."""
    settings = cli_settings()
    spec = datasource_spec(settings)
    boards = build_dashboards(dialect_name(settings), settings.public_url)
    with click.progressbar(length=1, label="exporting") as bar:
        written = export(directory, spec, boards, grafana_provisioning)
        bar.update(1)
    if dialect_name(settings) == "sqlite":
        refresh_reporting_copy(settings.database_url)
        written.append(reporting_copy_path(settings.database_url))
        click.echo("the reporting copy is kept current by `crashreg scheduler` (grafana-rollups)", err=True)
    for path in written:
        click.echo(str(path))
    if spec.secret is not None:
        click.echo(f"set {PASSWORD_ENV} in Grafana's environment to the read-only role's password", err=True)
        if settings.grafana_db_url is None:
            click.echo(
                "CRASHREG_GRAFANA_DB_URL is not set: the role's password is derived and not shown; "
                "set CRASHREG_GRAFANA_DB_URL to choose it, then run `crashreg grafana provision`",
                err=True,
            )
