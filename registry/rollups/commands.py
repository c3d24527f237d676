"""`crashreg rollups fold` (what the scheduler's rollups job does, now) and `crashreg rollups
rebuild` (repair: the rollups computed again from events; docs/rollups.md)."""

from __future__ import annotations

import click

from registry.cli_support import CliContext, pass_cli
from registry.rollups.fold import fold, rebuild


@click.group("rollups")
def rollups() -> None:
    """The counts Grafana, the list page and alert rules read (docs/rollups.md)."""


def _progress(line: str) -> None:
    click.echo(line, err=True)


@rollups.command("fold")
@pass_cli
def fold_command(cli: CliContext) -> None:
    """Fold the queued event changes into the rollups (building them first if a backfill is due)."""
    outcome = fold(cli.database(), progress=_progress)
    click.echo(f"folded {outcome.changes} changes in {outcome.batches} batches"
               + (" after building the rollups from events" if outcome.rebuilt else ""))


@rollups.command("rebuild")
@click.option("--yes", is_flag=True,
              help="Do not ask: events and captures already archived drop out of the counts.")
@pass_cli
def rebuild_command(cli: CliContext, yes: bool) -> None:
    """Compute the rollups again from the events there are (repair). Counts of events (and
    captures) archived or deleted are lost: the rollups are otherwise their only record."""
    if not yes:
        click.confirm("Rebuild the rollups from the events in the database?", abort=True)
    rebuild(cli.database(), progress=_progress)
    click.echo("rollups rebuilt from events")
