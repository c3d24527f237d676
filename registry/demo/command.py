"""`crashreg demo`: a simulated fleet, end to end, on the embedded default database.

Starts the registry in-process on a real port (or, when the port is taken by a registry on
the same database, such as `make run`'s, feeds that one; taken by anything else, serves on a
free port and says so), feeds it a simulated fleet anchored to today (inventory and crashes
through the HTTP API), runs the epidemiology refresh, prints what a manager and an engineer
want first, a mixed signature and how to read it, and leaves the registry serving.

It serves the whole application, so the demo package sits at the application level beside
app.py and cli.py, above the domains (the epidemiology it shows off imports no app).
"""

from __future__ import annotations

import errno
import logging
import socket
import threading
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

import click
import requests
from sqlalchemy import func, select
from werkzeug.serving import BaseWSGIServer, make_server

from registry.app import create_app
from registry.auth.tokens import create_token
from registry.cli_support import CliContext, database_label, pass_cli
from registry.config import Settings
from registry.core.events import Event, Report
from registry.core.signatures import Signature
from registry.db import Database
from registry.demo.feed import feed
from registry.demo.labelled_cores import ARCHIVE, read_cores, with_real_cores
from registry.demo.simulator import SERVICE_LABEL, FleetConfig, confounded, simulate, today_start
from registry.epidemiology.models import EpidemiologySuspectHost, EpidemiologyVerdict
from registry.epidemiology.service import refresh, store_program_label, stored_program_label
from registry.migrate import upgrade

TOP_SIGNATURES = 10


@dataclass
class DemoRegistry:
    url: str
    server: BaseWSGIServer | None  # None: feeding a registry that was already serving
    thread: threading.Thread | None
    database: Database
    how: str  # which registry the demo uses, in words

    def stop(self) -> None:
        if self.server is not None and self.thread is not None:
            self.server.shutdown()
            self.thread.join()
        self.database.dispose()


def _serves_this_database(url: str, token: str) -> bool:
    """Does the registry at `url` accept a token just made in our database (then it is ours)?"""
    try:
        answer = requests.get(
            f"{url}/api/v1/signatures?limit=1", headers={"Authorization": f"Bearer {token}"}, timeout=5
        )
    except requests.RequestException:
        return False
    return answer.status_code == 200


def _port_taken(host: str, port: int) -> bool:
    """Werkzeug exits the process on a taken port; ask first (TIME_WAIT does not count)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            return error.errno == errno.EADDRINUSE
    return False


def start_registry(settings: Settings, host: str, port: int, probe_token: str | None = None,
                   url: str | None = None) -> DemoRegistry:
    """Migrate the database and serve the registry on a real socket in this process. `url`: the
    registry the demo was told about (--url, CRASHREG_PUBLIC_URL): fed when it serves this
    database, else served there. When `port` is taken: by a registry on this database (it
    accepts `probe_token`), use that one; by anything else, serve on a free port."""
    upgrade(settings.database_url)
    database = Database(settings.database_url)
    for name in ("crashreg.access", "werkzeug"):  # a request log per crash would drown the story
        logging.getLogger(name).setLevel(logging.WARNING)
    if url is not None:
        where = urlsplit(url)
        host, port = where.hostname or host, where.port or (443 if where.scheme == "https" else 80)
        if probe_token is not None and _serves_this_database(url, probe_token):
            return DemoRegistry(url, None, None, database, f"{url} serves this database: feeding it")
    how = "serving on port {}"
    if port and _port_taken(host, port):
        taken = f"http://{host}:{port}"
        if probe_token is not None and _serves_this_database(taken, probe_token):
            how = f"port {port} is taken by a registry on this database: using it"
            return DemoRegistry(taken, None, None, database, how)
        port, how = 0, f"port {port} is taken by another server: serving on the free port {{}} instead"
    server = make_server(host, port, None, threaded=True)
    served = f"http://{host}:{server.server_port}"
    # its links (pages, bundles, core commands) name where it serves
    server.app = create_app(replace(settings, public_url=served), database)
    how = how.format(server.server_port)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return DemoRegistry(served, server, thread, database, how)


def summary_lines(database: Database, base_url: str) -> list[str]:
    """What a manager and an engineer want to see first, from the stored analyses."""
    lines: list[str] = []
    with database.session() as session:
        events, hosts = session.execute(select(func.count(), func.count(func.distinct(Event.hostname)))).one()
        rows = session.execute(
            select(EpidemiologyVerdict, Signature.title)
            .join(Signature, Signature.id == EpidemiologyVerdict.signature_id)
            .order_by(EpidemiologyVerdict.events.desc())
        ).all()
        suspects = session.scalars(
            select(EpidemiologySuspectHost).order_by(EpidemiologySuspectHost.rank).limit(5)
        ).all()
    verdicts = Counter(row.verdict for row, _ in rows)
    lines += [
        "",
        "== For the manager ==",
        f"{events} crashes on {hosts} hosts in {len(rows)} signatures.",
        "Verdicts: " + ", ".join(f"{n} {verdict}" for verdict, n in verdicts.most_common()),
        "",
        f"Top {TOP_SIGNATURES} signatures by crashes:",
    ]
    for row, title in rows[:TOP_SIGNATURES]:
        lines.append(f"  #{row.signature_id:<4} {row.events:>5} crashes  {row.verdict:<16} {title[:70]}")
    lines += ["", "== For the engineer: what each verdict rests on =="]
    for row, title in rows:
        if row.verdict == "inconclusive":
            continue
        lines.append(f"  #{row.signature_id} {title[:80]}")
        lines.append(f"      {row.verdict}: {row.reason}")  # what carries the verdict
        onset = row.analysis.get("onset", {})
        if onset.get("change_point"):
            rollout = ""
            if onset.get("lined_up"):
                change = onset["lined_up"][0]
                rollout = f"; {change['hosts']} hosts took {change['attribute']}={change['value']} then"
            lines.append(f"      onset: {onset['shape']} on {onset['change_point']}{rollout}")
        if row.uptime_statement:
            lines.append(f"      uptime: {row.uptime_statement}")
    waiting = [row for row, _ in rows if row.verdict == "inconclusive" and row.more_events_needed]
    if waiting:
        lines.append(
            f"  {len(waiting)} small signatures are inconclusive; e.g. #{waiting[0].signature_id}: "
            f"{waiting[0].reason}"
        )
    lines += mixture_lines(rows)
    lines += ["", "== Suspect physical hosts (across signatures) =="]
    if not suspects:
        lines.append("  none")
    for suspect in suspects:
        lines.append(f"  {suspect.rank}. {suspect.physical_host}: {suspect.evidence}")
    first = rows[0][0].signature_id if rows else 1
    lines += [
        "",
        "Try:",
        f'  curl -H "Authorization: Bearer $TOKEN" {base_url}/api/v1/signatures/{first}/epidemiology',
        f'  curl -H "Authorization: Bearer $TOKEN" {base_url}/api/v1/epidemiology/hosts',
        f"  open {base_url}/signatures in a browser and log in with the read token below",
    ]
    return lines


HOW_TO_READ = (
    "How to read it: two bugs under one signature. The concentrated part is a host problem "
    "(drain that physical host, run its hardware checks); the spread part carries the verdict "
    "and is the software bug to debug from the stack. The process lines tell the parts apart: "
    "the crashes carry their process (its release, start and age, from the reports' stack), and "
    "a start-up race crashes processes minutes old where a bad host crashes them at any age. "
    "The findings are computed against the "
    "hosts that run the program, so what every one of them shares (the pool's virtual BIOS, "
    "its hypervisor) is never blamed."
)


def mixture_lines(rows: list[Any]) -> list[str]:
    """The largest mixed signature, its parts and how to read them."""
    mixed = [(row, title) for row, title in rows if row.analysis.get("components")]
    lines = ["", "== A mixed signature, and how to read it =="]
    if not mixed:
        return [*lines, "  none in this fleet"]
    row, title = mixed[0]
    lines.append(f"  #{row.signature_id} {title[:90]} ({row.events} crashes)")
    lines += [f"    - {statement}" for statement in row.analysis.get("statements", [])]
    return [*lines, f"  {HOW_TO_READ}"]


# A database holding more crash reports than this that no demo sent is taken for a registry in
# use: the demo's thousand crashes would mix with its own and spend its bugs' capture budgets.
# A first hour's few reports by hand are far fewer.
FOREIGN_REPORTS_TOLERATED = 100


def foreign_reports(database: Database) -> int:
    """Crash reports in the database that no demo sent (a demo's report_ids are `sim<seed>-N`),
    counted up to one past the tolerated (a registry of years is not read through for it)."""
    not_a_demos = ~Report.report_id.like("sim%")
    sent_elsewhere = select(Report.id).where(not_a_demos).limit(FOREIGN_REPORTS_TOLERATED + 1)
    with database.read_only() as session:
        return session.scalar(select(func.count()).select_from(sent_elsewhere.subquery())) or 0


def run_demo(settings: Settings, host: str, port: int, config: FleetConfig, serve: bool,
             url: str | None = None, into_any_database: bool = False) -> dict[str, Any]:
    """`settings`: the program label (the environment's, else the database's) defaults to the
    one the simulated fleet carries, and is left stored in the database, so the pages and
    `make run` on it answer as the demo printed. A database in use (FOREIGN_REPORTS_TOLERATED)
    is refused unless `into_any_database`."""
    upgrade(settings.database_url)
    tokens = Database(settings.database_url)
    foreign = foreign_reports(tokens)
    if foreign > FOREIGN_REPORTS_TOLERATED and not into_any_database:
        tokens.dispose()
        raise click.ClickException(
            f"{database_label(settings)} holds {foreign} crash reports no demo sent: a registry in use. The "
            "demo would add a simulated fleet's thousand crashes to its own and spend its bugs' capture "
            "budgets. Run it on a database of its own (the embedded default, or CRASHREG_DATABASE_URL "
            "naming an empty one), or pass --into-this-database to feed this one all the same."
        )
    with tokens.session() as session:
        reporter, _ = create_token(session, f"demo-reporter-{config.seed}", "report", "agent")
        reader, _ = create_token(session, "demo-reader", "read", "human")
        stored = stored_program_label(session)
        label = settings.epidemiology_program_label or stored or SERVICE_LABEL[0]
        if label != stored:
            store_program_label(session, label)
    tokens.dispose()
    settings = replace(settings, epidemiology_program_label=label)
    registry = start_registry(settings, host, port, reader, url)
    click.echo(f"Registry: {registry.url} ({registry.how})")
    cores = read_cores()
    sim = with_real_cores(simulate(config), cores)
    click.echo(
        f"Simulated fleet: {len(sim.hosts)} hosts on "
        f"{len({h['physical_host'] for h in sim.hosts.values()})} physical hosts, "
        f"{config.days} days up to {sim.end:%Y-%m-%d %H:%M} UTC, {len(sim.reports)} crashes "
        f"(seed {config.seed})."
    )
    on_cores = sum(1 for report in sim.reports if sim.bug_of[report["report_id"]].core)
    click.echo(
        f"Its {on_cores} crashes of ingest-worker carry the stacks the core handler's file mode read "
        f"from {len(cores)} real cores of it ({ARCHIVE.relative_to(ARCHIVE.parents[3])}); the registry "
        "labels them."
    )
    with click.progressbar(length=len(sim.reports), label="Ingesting crashes through the API") as bar:
        feed(sim, registry.url, reporter, bar.update)
    with registry.database.session() as session:
        signatures = session.scalar(select(func.count()).select_from(Signature)) or 0
        with click.progressbar(length=signatures, label="Analysing signatures") as bar:
            refresh(session, lambda done, total: bar.update(1), settings.epidemiology_program_label)
    for line in summary_lines(registry.database, registry.url):
        click.echo(line)
    click.echo("")
    click.echo(f"Registry: {registry.url}   (database {database_label(settings)}; {registry.how})")
    click.echo(f"Read token: {reader}")
    click.echo(
        f"Program label: {label} (stored in the database: every registry on it compares a program's "
        f"crashes with the hosts labelled {label}=<program>, as above: `crashreg epidemiology program-label`)"
    )
    if serve and registry.server is None:
        click.echo("The registry that was already serving keeps serving the data.")
    elif serve:
        click.echo("Serving until Ctrl-C.")
        try:
            registry.thread.join()
        except KeyboardInterrupt:
            click.echo("stopping")
    registry.stop()
    return {"url": registry.url, "read_token": reader}


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
@click.option("--into-this-database", "into_any_database", is_flag=True,
              help=f"feed a database that holds more than {FOREIGN_REPORTS_TOLERATED} crash reports no demo "
              "sent (refused without it: a registry in use)")
@click.option(
    "--url",
    envvar="CRASHREG_PUBLIC_URL",
    help="the registry to feed (default: CRASHREG_PUBLIC_URL): fed when it serves this database, "
    "else the demo serves there; --host and --port are then not used",
)
@pass_cli
def demo(cli: CliContext, seed: int, host: str, port: int, physical_per_cluster: int, serve: bool,
         into_any_database: bool, url: str | None) -> None:
    """A simulated fleet of the last 90 days, end to end, on the embedded default database (or
    another holding no registry's crashes)."""
    config = confounded(seed, physical_per_cluster=physical_per_cluster, start=today_start())
    try:
        run_demo(cli.settings, host, port, config, serve, url.rstrip("/") if url else None, into_any_database)
    except OSError as error:
        raise click.ClickException(f"cannot serve on {host}:{port}: {error} (try --port 0)") from None
