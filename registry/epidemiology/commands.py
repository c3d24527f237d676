"""CLI: `crashreg epidemiology refresh` and `crashreg demo`."""

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


@click.command()
@click.option("--seed", default=7, show_default=True, type=int, help="simulation seed")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option(
    "--port",
    default=8080,
    show_default=True,
    type=int,
    help="0: any free port; taken: the registry serving there if it is on this database, else a free port",
)
@click.option(
    "--physical-per-cluster",
    default=35,
    show_default=True,
    type=click.IntRange(8, 500),
    help="fleet size: physical hosts per cluster (12 clusters)",
)
@click.option("--serve/--no-serve", default=True, help="keep serving after the summary")
@pass_cli
def demo(cli: CliContext, seed: int, host: str, port: int, physical_per_cluster: int, serve: bool) -> None:
    """A simulated fleet of the last 90 days, end to end, on the embedded default database."""
    from .demo import run_demo
    from .simulator import confounded, today_start

    config = confounded(seed, physical_per_cluster=physical_per_cluster, start=today_start())
    try:
        run_demo(cli.settings, host, port, config, serve)
    except OSError as error:
        raise click.ClickException(f"cannot serve on {host}:{port}: {error} (try --port 0)") from None
