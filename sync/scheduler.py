"""`crashreg scheduler`: periodic jobs (Jira sync, reconciliation, and whatever other domains
register), run by one leader among however many scheduler processes are started.

Adding a job: in your package, decorate a function taking a JobContext with
`@register_job("name", seconds=...)` and declare the module in your package's wiring
(`wiring.job_modules`, registered through the "crashreg.domains" entry points).
"""

from __future__ import annotations

import importlib
import logging
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import click

from registry import domains
from registry.cli_support import CliContext, pass_cli
from registry.config import Settings
from registry.core.wiring import Wiring
from registry.db import Database, utcnow
from sync.leader import LeaderLock, leader_lock

log = logging.getLogger("crashreg.scheduler")

@dataclass
class JobContext:
    settings: Settings
    database: Database
    clock: Callable[[], datetime] = utcnow


@dataclass(frozen=True)
class Job:
    name: str
    seconds: float
    run: Callable[[JobContext], Any]
    enabled: Callable[[Settings], bool] = field(default=lambda settings: True)


JOBS: dict[str, Job] = {}


def register_job(name: str, seconds: float, enabled: Callable[[Settings], bool] = lambda s: True):
    """Decorator: run the function every `seconds` on the leader scheduler."""

    def add(run: Callable[[JobContext], Any]) -> Callable[[JobContext], Any]:
        JOBS[name] = Job(name, seconds, run, enabled)
        return run

    return add


def load_jobs() -> dict[str, Job]:
    for module in domains.wiring().job_modules:  # each calls register_job at import time
        importlib.import_module(module)
    return JOBS


class Scheduler:
    """APScheduler 3 underneath; every run first checks (or takes) leadership."""

    def __init__(self, context: JobContext, lock: LeaderLock, jobs: dict[str, Job] | None = None):
        # Not at the top: this module is the "crashreg.domains" entry point every command loads.
        from apscheduler.schedulers.background import BackgroundScheduler

        self.context = context
        self.lock = lock
        known = jobs if jobs is not None else load_jobs()
        self.jobs = {name: job for name, job in known.items() if job.enabled(context.settings)}
        self.off = sorted(set(known) - set(self.jobs))  # not configured (Jira, Grafana): said at start
        self.leading = False
        self.guard = threading.Lock()
        self.apscheduler = BackgroundScheduler(timezone="UTC")

    def is_leader(self) -> bool:
        with self.guard:
            was = self.leading
            self.leading = self.lock.try_acquire()
            if self.leading != was:
                log.info("leadership " + ("taken" if self.leading else "lost"))
            return self.leading

    def run_job(self, name: str) -> bool:
        """Run one job if this process leads; False when it is standing by."""
        if not self.is_leader():
            return False
        job = self.jobs[name]
        try:
            result = job.run(self.context)
            log.info("job done", extra={"fields": {"job": name, "result": str(result)[:500]}})
        except Exception as error:  # a failing job must not kill the scheduler
            log.exception("job failed", extra={"fields": {"job": name, "error": str(error)[:500]}})
        return True

    def start(self) -> None:
        for name, job in self.jobs.items():
            self.apscheduler.add_job(
                self.run_job, "interval", seconds=job.seconds, args=[name], id=name,
                max_instances=1, coalesce=True, next_run_time=utcnow(),
            )
        self.apscheduler.start()
        log.info("scheduler started", extra={"fields": {"jobs": sorted(self.jobs)}})

    def shutdown(self) -> None:
        """Let running jobs finish, then give up leadership."""
        if self.apscheduler.running:
            self.apscheduler.shutdown(wait=True)
        with self.guard:
            self.lock.release()
            self.leading = False
        log.info("scheduler stopped")


STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}


def run_until_signalled(scheduler: Scheduler) -> None:
    """Run the scheduler until SIGTERM or SIGINT, then let its jobs finish.

    The stop signals are blocked before the scheduler starts a thread and stay blocked: every
    thread inherits the mask, so the kernel keeps a stop signal pending until this thread takes
    it with sigtimedwait. No Python handler waits for the main thread's next bytecode, and no
    job thread can swallow the signal."""
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        scheduler.start()
        while (received := signal.sigtimedwait(STOP_SIGNALS, 3600)) is None:
            pass
        log.info("stopping", extra={"fields": {"signal": signal.Signals(received.si_signo).name}})
    finally:
        scheduler.shutdown()
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


@click.command("scheduler")
@pass_cli
def scheduler_command(cli: CliContext) -> None:
    """Run the scheduled jobs (Jira sync, reconciliation, ...); one leader among many."""
    from registry.app import configure_logging

    configure_logging()
    database = cli.database()
    scheduler = Scheduler(JobContext(cli.settings, database), leader_lock(database.engine))
    if not scheduler.jobs:
        raise click.ClickException("no job is enabled: configure CRASHREG_JIRA_* (see README, ## Jira)")
    click.echo(f"crashreg scheduler: jobs {', '.join(sorted(scheduler.jobs))}", err=True)
    if scheduler.off:
        click.echo(f"crashreg scheduler: off until configured: {', '.join(scheduler.off)} (the settings in "
                   "docs/configuration.md: CRASHREG_JIRA_*, CRASHREG_GRAFANA_*, CRASHREG_ARCHIVE_AFTER_DAYS)",
                   err=True)
    run_until_signalled(scheduler)


def register(wiring: Wiring) -> None:
    wiring.commands["scheduler"] = "sync.scheduler:scheduler_command"
