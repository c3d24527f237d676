"""CLI: `crashreg epidemiology refresh` and `crashreg epidemiology hosts`."""

from __future__ import annotations

import json

import click

from registry.cli_support import CliContext, pass_cli


@click.group()
def epidemiology() -> None:
    """Crash epidemiology: verdicts per signature and fleet-wide suspect hosts."""


@epidemiology.command("refresh")
@pass_cli
def refresh_command(cli: CliContext) -> None:
    """Recompute and store every signature's epidemiology (what Grafana shows)."""
    from .service import refresh

    database = cli.database()
    with (
        database.session() as session,
        click.progressbar(length=0, label="Analysing signatures", show_pos=True) as bar,
    ):

        def progress(done: int, total: int) -> None:
            bar.length = total
            bar.update(1)

        outcome = refresh(session, progress, cli.settings.epidemiology_program_label)
    click.echo(
        json.dumps(
            {"signatures": outcome.signatures, "suspects": outcome.suspects, "verdicts": outcome.verdicts}
        )
    )


@epidemiology.command("hosts")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 200))
@pass_cli
def hosts_command(cli: CliContext, limit: int) -> None:
    """Fleet-wide suspect hosts, as JSON lines."""
    from .service import suspects

    with cli.database().session() as session:
        for suspect in suspects(session, limit):
            click.echo(json.dumps(suspect))
