"""`crashreg grafana provision [--force]` and `crashreg grafana export DIR`."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from dashboards import build_dashboards
from registry.cli_support import CliContext, pass_cli
from sync.grafana.alerting import AlertRulesInvalid, checked
from sync.grafana.datasource import datasource_spec, dialect_name
from sync.grafana.export import DEFAULT_GRAFANA_PROVISIONING, export, next_steps
from sync.grafana.provision import Outcome
from sync.grafana.role import RoleError
from sync.grafana.rollups import refresh_rollups, reporting_copy_path
from sync.grafana.service import GrafanaNotConfigured, alert_rule_group, check_configured, provision


@click.group()
def grafana() -> None:
    """Grafana: read-only role, data source, dashboards."""


@grafana.command("provision")
@click.option("--force", is_flag=True, help="Overwrite dashboards edited in Grafana.")
@pass_cli
def provision_command(cli: CliContext, force: bool) -> None:
    """Create or check the read-only role; provision folder, data source, dashboards, alert rules."""

    def progress(outcome: Outcome) -> None:
        click.echo(outcome.line())

    try:
        settings = cli.settings
        check_configured(settings)  # a missing setting is said before the database is opened
        result = provision(settings, cli.database(), force=force, progress=progress)
    except (GrafanaNotConfigured, RoleError, AlertRulesInvalid) as error:
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
        click.echo(
            f"{len(kept)} object(s) not overwritten: rerun with --force to replace edited ones; "
            "conflicts name what to move first",
            err=True,
        )
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
@pass_cli
def export_command(cli: CliContext, directory: Path, grafana_provisioning: str) -> None:
    """Write Grafana's file-provisioning layout (data source, dashboards, alert rules)."""
    settings = cli.settings
    spec = datasource_spec(settings)
    boards = build_dashboards(dialect_name(settings), settings.public_url)
    try:
        rules = checked(alert_rule_group(settings, boards))
    except AlertRulesInvalid as error:
        raise click.ClickException(str(error)) from error
    with click.progressbar(length=1, label="exporting") as bar:
        written = export(directory, spec, boards, grafana_provisioning, rules)
        bar.update(1)
    if dialect_name(settings) == "sqlite":
        refresh_rollups(cli.database())  # the copy's daily views read the rollups: fold first
        written.append(reporting_copy_path(settings.database_url))
        click.echo("the reporting copy is kept current by `crashreg scheduler` (grafana-rollups)", err=True)
    for path in written:
        click.echo(str(path))
    click.echo("next, as the Grafana admin:", err=True)
    for number, step in enumerate(next_steps(directory, spec, grafana_provisioning), start=1):
        click.echo(f"  {number}. {step}", err=True)
    if spec.secret is not None and settings.grafana.db_url is None:
        click.echo(
            "CRASHREG_GRAFANA_DB_URL is not set: the role's password is random, kept in the "
            "registry's database and not shown; set CRASHREG_GRAFANA_DB_URL to choose it, then run "
            "`crashreg grafana provision`",
            err=True,
        )
