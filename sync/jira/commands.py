"""`crashreg jira sync [--once]` and `crashreg jira check`."""

from __future__ import annotations

import json

import click

from registry.cli_support import CliContext, pass_cli
from sync.jira.check import FAIL, run_checks


@click.group("jira")
def jira() -> None:
    """Jira sync: one issue per signature, both ways."""


@jira.command("sync")
@click.option("--once", is_flag=True, help="one round (outbox, facts, reconciliation), then exit")
@pass_cli
def sync(cli: CliContext, once: bool) -> None:
    """Sync with Jira: every 30 s (reconciliation every 10 min) until stopped, or --once."""
    import requests
    from jira import JIRAError

    from registry.app import configure_logging
    from registry.db import utcnow
    from sync.jira.client import classify
    from sync.jira.jobs import jira_reconcile
    from sync.leader import leader_lock
    from sync.scheduler import JOBS, JobContext, Scheduler, load_jobs, run_until_signalled

    configure_logging()
    settings, database = cli.settings, cli.database()
    if not settings.jira.enabled:
        raise click.ClickException(
            "Jira sync is off: set CRASHREG_JIRA_URL, CRASHREG_JIRA_TOKEN and CRASHREG_JIRA_PROJECT")
    context, lock = JobContext(settings, database), leader_lock(database.engine)
    if not once:
        load_jobs()
        jobs = {name: job for name, job in JOBS.items() if name.startswith("jira-")}
        run_until_signalled(Scheduler(context, lock, jobs))
        return
    if not lock.try_acquire():
        raise click.ClickException(
            "another crashreg (scheduler or sync) holds the leader lock and is syncing; not syncing twice")
    try:
        click.echo(json.dumps(jira_reconcile(context), default=str))
    except (requests.RequestException, JIRAError) as error:  # Jira down or refusing us: one line
        raise click.ClickException(f"Jira sync failed: {classify(error, utcnow()).message}") from None
    finally:
        lock.release()


@jira.command("requeue")
@pass_cli
def requeue(cli: CliContext) -> None:
    """Retry the changes Jira refused permanently (HTTP 4xx), once their cause is fixed."""
    from sync.jira.drain import requeue_refused

    count = requeue_refused(cli.database())
    click.echo(f"{count} refused change(s) queued again; the next sync round sends them", err=True)


@jira.command("check")
@pass_cli
def check(cli: CliContext) -> None:
    """Preflight: reachability, auth, project, issue type, permissions, workflow, search, webhooks."""
    findings = run_checks(cli.settings)
    width = max(len(f.topic) for f in findings)
    for finding in findings:
        click.echo(f"{finding.level:<4}  {finding.topic:<{width}}  {finding.message}")
    if any(f.level == FAIL for f in findings):
        raise SystemExit(1)
