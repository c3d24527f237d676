"""Crash storm: thousands of hosts report one new bug at once; is the capture answer exact and fast?

    .venv/bin/python bench/storm.py [--hosts 1500] [--concurrency 64] [--clients both] [--json OUT]

Starts gunicorn (the repository's gunicorn.conf.py; --workers, --threads override it) on a fresh
PostgreSQL database, serving the registry and, beside it, a bare Flask route that only reads the same
request body, and a floor route: the least any registry must do per report (fingerprint it
with the real engine and store it durably, group-committed: one INSERT and one COMMIT for
every report waiting), with no authentication, validation, policy or inventory. A single
client thread keeps `--concurrency` requests in flight, each on its own connection as a
crash kernel sends its one report: first the bare route for `--bare-seconds`, then the
storm's reports to the floor route and to the registry, in `--turns` slices that the two
routes take in turn (so that the machine's drift in speed falls on both): one report per host (a real
syzkaller console log, its timestamps and addresses varied per host) with 10% of the
requests resends of an earlier report (same report_id), some arriving while the first is
still in flight.

Reported: the CPU a report costs gunicorn's workers and PostgreSQL's backends and the throughput,
each as a ratio to the floor route's in the same run (issue 29's goals: at most 1.5x the CPU,
at least 2/3 the throughput), the ratios to the bare route, p50/p99 latency, lost acknowledgements
(acknowledged report_ids missing from the database), duplicates (reports or events stored
twice, or a resend answered with another event), full captures (must be exactly K), and
each worker's peak RSS (VmHWM). Exit status 1 when a goal is missed.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import re
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import click
from sqlalchemy import text

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from registry.auth.tokens import create_token  # noqa: E402
from registry.config import Settings  # noqa: E402
from registry.db import Database  # noqa: E402
from registry.migrate import upgrade  # noqa: E402

DEFAULT_LOG = ROOT / "tests/corpus/syzkaller-linux/105"  # the corpus the repository carries
POSTGRES_ADMIN = os.environ.get("CRASHREG_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")
# Issue 29: a report's CPU (workers and PostgreSQL backends) within 1.5x the floor route's and
# its throughput at least 2/3 of the floor route's, both measured in the same run.
# Issue 43: on years of history, at least 0.9x the throughput on an empty registry.
GOALS = {"cpu_x_floor": 1.5, "rps_x_floor": 2 / 3, "p99_ms": 250.0, "rss_mb": 200.0, "rps_x_empty": 0.9}
RETRY_SHARE = 0.10
_TIMESTAMP = re.compile(r"\[ *\d+\.\d+\]")
_ADDRESS = re.compile(r"\b[0-9a-f]{16}\b")


# --- the WSGI app gunicorn serves: the registry plus a bare route ---------------------------


def bench_app() -> Any:
    """gunicorn 'storm:bench_app()': /bare is a plain Flask route, /floor the floor route,
    everything else the registry."""
    from flask import Flask, jsonify, request
    from werkzeug.middleware.dispatcher import DispatcherMiddleware

    from registry.app import create_app
    from registry.signatures.identify import identify

    bare = Flask("bare")

    @bare.post("/")
    def bare_route() -> Any:
        request.get_data()
        return jsonify({"ok": True})

    floor = Flask("floor")
    store = GroupCommit(os.environ["CRASHREG_DATABASE_URL"])

    @floor.post("/")
    def floor_route() -> Any:
        body = json.loads(request.get_data())
        crash = identify(body["console_log"], None)
        fingerprint = crash.fingerprint if crash else None
        return jsonify({"id": store.insert((body["report_id"], fingerprint, body["console_log"]))})

    app = DispatcherMiddleware(create_app(), {"/bare": bare, "/floor": floor})
    profile_dir = os.environ.get("CRASHREG_STORM_PROFILE")
    return profiled(app, Path(profile_dir)) if profile_dir else app


def profiled(app: Any, directory: Path) -> Any:
    """--profile: each worker records CPU time (not waits) per function, dumped at exit."""
    import atexit
    import cProfile

    profile = cProfile.Profile(time.process_time)
    atexit.register(lambda: profile.dump_stats(directory / f"worker-{os.getpid()}.prof"))

    def wsgi(environ: dict[str, Any], start_response: Any) -> Any:
        profile.enable()
        try:
            return list(app(environ, start_response))
        finally:
            profile.disable()

    return wsgi


FLOOR_TABLE = (
    "CREATE TABLE storm_floor (id bigserial PRIMARY KEY, report_id text UNIQUE NOT NULL, "
    "fingerprint text, console_log text NOT NULL)"
)
FLOOR_INSERT = (
    "INSERT INTO storm_floor (report_id, fingerprint, console_log) "
    "SELECT * FROM unnest(%s::text[], %s::text[], %s::text[]) "
    "ON CONFLICT (report_id) DO UPDATE SET report_id = excluded.report_id RETURNING report_id, id"
)


FLOOR_APPLICATION = "crashreg-storm-floor"  # the floor route's connection, told apart by PostgreSQL


class GroupCommit:
    """The floor route's store: the worker's request threads hand their rows to one writer
    thread, which inserts everything waiting in one statement and one commit, then answers
    each thread with its row's id (a resent report_id gets the stored id)."""

    def __init__(self, url: str) -> None:
        self.url = url.replace("postgresql+psycopg://", "postgresql://")
        self.waiting: list[tuple[tuple[str, str | None, str], Any]] = []
        self.ready = threading.Condition()
        self.writer = threading.Thread(target=self.write_forever, daemon=True)
        self.writer.start()

    def insert(self, row: tuple[str, str | None, str]) -> int:
        answer: Future[int] = Future()
        with self.ready:
            self.waiting.append((row, answer))
            self.ready.notify()
        return answer.result()

    def write_forever(self) -> None:
        import psycopg

        with psycopg.connect(self.url, application_name=FLOOR_APPLICATION) as connection:
            while True:
                with self.ready:
                    self.ready.wait_for(lambda: self.waiting)
                    batch, self.waiting = self.waiting, []
                latest = {row[0]: row for row, _ in batch}  # one row per report_id per statement
                columns = [list(column) for column in zip(*latest.values(), strict=True)]
                with connection.transaction():
                    ids = dict(connection.execute(FLOOR_INSERT, columns).fetchall())
                for row, answer in batch:
                    answer.set_result(ids[row[0]])


# --- the load: reports of one bug from many hosts, with resends ------------------------------


def host_log(template: str, rng: random.Random) -> str:
    """The same crash as another host prints it: other uptime, other addresses."""
    base = rng.uniform(100, 900_000)
    stamped = _TIMESTAMP.sub(lambda m: f"[{base + rng.random():12.6f}]", template)
    return _ADDRESS.sub(lambda m: f"ffff88{rng.getrandbits(40):010x}", stamped)


def storm_requests(template: str, hosts: int, seed: int = 7) -> list[dict[str, Any]]:
    """One report per host; about RETRY_SHARE of all requests resend an earlier report."""
    rng = random.Random(seed)
    start = datetime.now(UTC) - timedelta(minutes=10)
    bodies: list[dict[str, Any]] = []
    sent: list[dict[str, Any]] = []
    for number in range(hosts):
        body = {
            "report_id": f"storm-{seed}-{number}",
            "source": "crash_kernel",
            "crashed_at": (start + timedelta(seconds=number * 0.1)).isoformat().replace("+00:00", "Z"),
            "host": {"hostname": f"gpu-{number:05d}", "region": "us-east", "cluster": f"c{number % 40}",
                     "kernel_version": "6.8.0-52-generic", "memory_gb": 2048},
            "boot_id": f"boot-{seed}-{number}",
            "uptime_s": rng.randint(60, 9_000_000),
            "console_log": host_log(template, rng),
        }
        bodies.append(body)
        sent.append(body)
        if rng.random() < RETRY_SHARE / (1 - RETRY_SHARE):
            bodies.append(rng.choice(sent[-64:]))  # recent: often still in flight
    return bodies


# --- a small HTTP/1.1 client (one thread, non-blocking sockets: 64 requests in flight) ----------
# The client runs on the server's cores, so what it burns the server cannot use: requests are
# built before the clock starts, answers parsed after it stops, and the loop is a bare selector
# (asyncio streams cost twice the CPU a request).


@dataclass
class Outcome:
    latencies: list[float] = field(default_factory=list)
    answers: list[tuple[dict[str, Any], int, bytes]] = field(default_factory=list)  # body, status, answer
    failures: list[str] = field(default_factory=list)
    elapsed: float = 0.0

    def parsed_answers(self) -> list[tuple[dict[str, Any], int, dict[str, Any]]]:
        return [(body, status, json.loads(answer)) for body, status, answer in self.answers]


CLIENT_PATTERNS = ("one-shot", "keep-alive")
_HEADERS_END = b"\r\n\r\n"


@dataclass
class Exchange:
    """One request on the wire: what is left to send, what has arrived, and its connection."""

    job: int
    request: bytes
    sock: socket.socket
    fresh: bool  # opened for this request (a kept one may have been closed by the server)
    started: float
    sent: int = 0
    received: bytearray = field(default_factory=bytearray)


def answer_in(received: bytearray) -> tuple[int, bytes, bool] | None:
    """Status, body and whether the server keeps the connection, once the answer is complete."""
    end = received.find(_HEADERS_END)
    if end < 0:
        return None
    lines = bytes(received[:end]).decode("latin-1").split("\r\n")
    length, keeps = 0, True
    for line in lines[1:]:
        name, _, value = line.partition(":")
        name = name.lower()
        if name == "content-length":
            length = int(value)
        elif name == "connection" and value.strip().lower() == "close":
            keeps = False
    if len(received) < end + 4 + length:
        return None
    return int(lines[0].split()[1]), bytes(received[end + 4 : end + 4 + length]), keeps


def http_request(path: str, token: str, body: bytes, keep_alive: bool = False) -> bytes:
    connection = "" if keep_alive else "Connection: close\r\n"
    head = (
        f"POST {path} HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n{connection}\r\n"
    )
    return head.encode() + body


def drive(
    port: int, requests: list[bytes] | None, seconds: float, concurrency: int, progress: Any,
    repeat: bytes = b"", keep_alive: bool = False, bodies: list[dict[str, Any]] | None = None,
) -> Outcome:
    """Send `requests` (or `repeat` again and again for `seconds`), `concurrency` at a time:
    each request on a connection of its own, or each client on one kept-alive connection
    (reopened when the server closes it; a request the server closed an idle kept connection
    under is sent once more on a new one: reports are idempotent on report_id). `bodies[i]`
    is recorded with the answer to `requests[i]`."""
    outcome = Outcome()
    selector = selectors.DefaultSelector()
    jobs = iter(range(len(requests))) if requests is not None else None
    deadline = time.perf_counter() + seconds
    idle: list[socket.socket] = []  # kept-alive connections waiting for their client's next request
    done = 0

    def next_request() -> tuple[int, bytes] | None:
        if jobs is None:
            return (-1, repeat) if time.perf_counter() < deadline else None
        job = next(jobs, None)
        return None if job is None else (job, requests[job])  # type: ignore[index]

    def start(job: int, request: bytes, started: float, reuse: bool = True) -> None:
        fresh = not (reuse and idle)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM) if fresh else idle.pop()
        if fresh:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.connect_ex(("127.0.0.1", port))
        selector.register(sock, selectors.EVENT_WRITE, Exchange(job, request, sock, fresh, started))

    def begin_next() -> None:
        job = next_request()
        if job is not None:
            start(*job, time.perf_counter())

    def finish(exchange: Exchange, keep: bool) -> None:
        selector.unregister(exchange.sock)
        if keep:
            idle.append(exchange.sock)
        else:
            exchange.sock.close()
        begin_next()

    def fail(exchange: Exchange, error: str) -> None:
        selector.unregister(exchange.sock)
        exchange.sock.close()
        if not exchange.fresh and not exchange.received:
            start(exchange.job, exchange.request, exchange.started, reuse=False)  # closed while idle
            return
        outcome.failures.append(error)
        begin_next()

    started = time.perf_counter()
    for _ in range(concurrency):
        begin_next()
    while selector.get_map():
        for key, events in selector.select():
            exchange: Exchange = key.data
            sock = exchange.sock
            try:
                if events & selectors.EVENT_WRITE:
                    exchange.sent += sock.send(memoryview(exchange.request)[exchange.sent :])
                    if exchange.sent == len(exchange.request):
                        selector.modify(sock, selectors.EVENT_READ, exchange)
                    continue
                chunk = sock.recv(65536)
            except OSError as error:
                fail(exchange, f"connection: {error!r}")
                continue
            if not chunk:
                fail(exchange, "connection: closed before answering")
                continue
            exchange.received += chunk
            answer = answer_in(exchange.received)
            if answer is None:
                continue
            status, payload, keeps = answer
            outcome.latencies.append(time.perf_counter() - exchange.started)
            if status >= 300:
                outcome.failures.append(f"HTTP {status}: {payload[:200]!r}")
            elif bodies is not None:
                outcome.answers.append((bodies[exchange.job], status, payload))
            done += 1
            if done % 16 == 0:
                progress.update(16)
            finish(exchange, keep_alive and keeps)
    outcome.elapsed = time.perf_counter() - started
    progress.update(done % 16)
    for sock in idle:
        sock.close()
    selector.close()
    return outcome


# --- the server and the database ---------------------------------------------------------------


def create_database() -> str:
    import psycopg

    name = f"crashreg_storm_{os.getpid()}_{int(time.time())}"
    with psycopg.connect(POSTGRES_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return POSTGRES_ADMIN.rsplit("/", 1)[0] + f"/{name}"


def drop_database(url: str) -> None:
    import psycopg

    with psycopg.connect(POSTGRES_ADMIN, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{url.rsplit("/", 1)[1]}" WITH (FORCE)')


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def gunicorn_settings(workers: int | None, threads: int | None) -> dict[str, Any]:
    """The settings the storm's gunicorn runs with, as production would: what the repository's
    gunicorn.conf.py makes of the environment, with the options (when given) set in it first as
    CRASHREG_WORKERS / CRASHREG_THREADS, which the gunicorn started later inherits."""
    import runpy

    environ = {"CRASHREG_WORKERS": workers, "CRASHREG_THREADS": threads}
    os.environ.update({name: str(value) for name, value in environ.items() if value is not None})
    values = runpy.run_path(str(ROOT / "gunicorn.conf.py"))
    return {name: values[name] for name in ("workers", "worker_class", "threads", "worker_connections")}


def start_gunicorn(url: str, port: int, log: Path, workers: int) -> subprocess.Popen[bytes]:
    env = os.environ | {
        "CRASHREG_DATABASE_URL": url,
        "PROMETHEUS_MULTIPROC_DIR": tempfile.mkdtemp(prefix="crashreg-storm-metrics-"),
    }
    command = [
        str(ROOT / ".venv/bin/gunicorn"), "-c", str(ROOT / "gunicorn.conf.py"),
        "--bind", f"127.0.0.1:{port}",
        "--max-requests", "0",  # no recycling mid-measurement: peak RSS must be the real peak
        "--pythonpath", f"{ROOT},{ROOT / 'bench'}", "storm:bench_app()",
    ]
    server = subprocess.Popen(command, env=env, cwd=ROOT, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    for _ in range(300):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as response:
                if response.status == 200 and len(worker_pids(server.pid)) == workers:
                    return server
        except OSError:
            pass
        if server.poll() is not None:
            raise SystemExit(f"gunicorn exited; see {log}")
        time.sleep(0.1)
    raise SystemExit(f"gunicorn did not become ready; see {log}")


@contextmanager
def fresh_database() -> Iterator[tuple[str, str]]:
    """A new PostgreSQL database, migrated, with a reporter token and the floor route's table;
    its URL and the token. Dropped afterwards."""
    url = create_database()
    try:
        upgrade(url)
        database = Database(url)
        with database.session() as session:
            token, _ = create_token(session, "storm", "report", "agent")
            session.execute(text(FLOOR_TABLE))
        database.dispose()
        yield url, token
    finally:
        drop_database(url)


def delete_referencing(conn: Any, table: str, ids: str) -> None:
    """Delete the rows of every table whose foreign key points at `table`'s rows `ids` (a
    SELECT of their ids), theirs first: the schema's own references, read from the catalogue."""
    references = conn.execute(
        "SELECT c.conrelid::regclass::text, a.attname FROM pg_constraint c "
        "JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1] "
        "WHERE c.contype = 'f' AND c.confrelid = %s::regclass AND cardinality(c.conkey) = 1",
        (table,)).fetchall()
    for child, column in references:
        if child != table:
            rows = f"SELECT id FROM {child} WHERE {column} IN ({ids})"
            if conn.execute("SELECT 1 FROM pg_attribute WHERE attrelid = %s::regclass AND attname = 'id'",
                            (child,)).fetchone():
                delete_referencing(conn, child, rows)
            conn.execute(f"DELETE FROM {child} WHERE {column} IN ({ids})")


STORM_HOSTS = "SELECT id FROM hosts WHERE hostname LIKE 'gpu-%' OR hostname LIKE 'warm-%'"


def clear_storm(url: str) -> None:
    """Take a storm's rows out of a kept registry: its hosts' events and what hangs off them,
    the hosts, the signatures only they had, its tokens and the floor route's table."""
    import psycopg

    with psycopg.connect(url.replace("+psycopg", ""), autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS storm_floor")
        signatures = [row[0] for row in conn.execute(
            f"SELECT DISTINCT signature_id FROM events WHERE host_id IN ({STORM_HOSTS}) "
            "AND signature_id IS NOT NULL")]
        events = f"SELECT id FROM events WHERE host_id IN ({STORM_HOSTS})"
        delete_referencing(conn, "events", events)
        conn.execute(f"DELETE FROM events WHERE id IN ({events})")
        delete_referencing(conn, "hosts", STORM_HOSTS)
        conn.execute(f"DELETE FROM hosts WHERE id IN ({STORM_HOSTS})")
        if signatures:
            alone = (f"SELECT id FROM signatures s WHERE id IN ({','.join(map(str, signatures))}) "
                     "AND NOT EXISTS (SELECT 1 FROM events e WHERE e.signature_id = s.id)")
            delete_referencing(conn, "signatures", alone)
            conn.execute(f"DELETE FROM signatures WHERE id IN ({alone})")
        delete_referencing(conn, "api_tokens", "SELECT id FROM api_tokens WHERE name LIKE 'storm-%'")
        conn.execute("DELETE FROM api_tokens WHERE name LIKE 'storm-%'")


@contextmanager
def history_database(url: str) -> Iterator[tuple[str, str]]:
    """A kept registry (bench/history.py's) with a reporter token and the floor route's table;
    its URL and the token. Afterwards the storm's rows are taken out again (clear_storm), so
    that every run meets the same history."""
    clear_storm(url)
    database = Database(url)
    with database.session() as session:
        token, _ = create_token(session, f"storm-{os.getpid()}-{time.time_ns()}", "report", "agent")
        session.execute(text(FLOOR_TABLE))
    database.dispose()
    try:
        yield url, token
    finally:
        clear_storm(url)


@contextmanager
def serving(
    url: str, workers: int, token: str, concurrency: int, label: str
) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """gunicorn serving bench_app() on the database, every worker warmed up; the server and its
    port. Stopped afterwards (if it is still running)."""
    port = free_port()
    server_log = Path(tempfile.mkdtemp(prefix="crashreg-storm-")) / "gunicorn.log"
    server = start_gunicorn(url, port, server_log, workers)
    try:
        with click.progressbar(length=concurrency, label=f"{label:10s} warm-up    ") as progress:
            warm_up(port, token, concurrency, progress)
        yield server, port
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=60)


def worker_pids(master: int) -> list[int]:
    children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    return sorted(int(pid) for pid in children)


def cpu_seconds(pids: list[int]) -> dict[int, float]:
    """User + system CPU each process has used so far (processes that are gone count 0)."""
    ticks = os.sysconf("SC_CLK_TCK")
    used = {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        used[pid] = (int(fields[11]) + int(fields[12])) / ticks
    return used


def database_backends(url: str) -> dict[int, str]:
    """The database's backends: pid -> application name (the floor route's is FLOOR_APPLICATION)."""
    import psycopg

    with psycopg.connect(POSTGRES_ADMIN, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid, application_name FROM pg_stat_activity WHERE datname = %s", (url.rsplit("/", 1)[1],)
        )
        return dict(rows.fetchall())


@dataclass(frozen=True)
class PhaseCpu:
    """CPU seconds a phase cost gunicorn's workers, PostgreSQL's backends and this client."""

    workers: float
    postgres: float
    client: float


def measured(server: subprocess.Popen[bytes], url: str, run: Any) -> tuple[Outcome, PhaseCpu]:
    """Run a phase; also the CPU seconds it cost the workers, the backends and the client (the
    client shares the machine's cores with the server: what it burns, the server cannot use).

    CPU per request does not depend on what else the (shared) machine is running, unlike
    throughput and latency."""
    workers, backends = worker_pids(server.pid), list(database_backends(url))
    before_workers, before_backends = cpu_seconds(workers), cpu_seconds(backends)
    before_client = time.process_time()
    outcome = run()
    client_cpu = time.process_time() - before_client
    after_workers = cpu_seconds(workers)
    after_backends = cpu_seconds(list(database_backends(url)))
    worker_cpu = sum(after_workers[pid] - before_workers.get(pid, 0.0) for pid in after_workers)
    backend_cpu = sum(after_backends[pid] - before_backends.get(pid, 0.0) for pid in after_backends)
    return outcome, PhaseCpu(worker_cpu, backend_cpu, client_cpu)


def turn_bounds(requests: int, turns: int) -> list[tuple[int, int]]:
    """The storm's requests cut into `turns` consecutive slices, which the floor route and the
    registry take in turn: the machine's drift in speed over the run (this shared machine's
    CPU a report moves by a third within minutes) falls on both routes alike."""
    edges = [round(requests * turn / turns) for turn in range(turns + 1)]
    return [(start, end) for start, end in itertools.pairwise(edges) if end > start]


def joined(turns: list[tuple[Outcome, PhaseCpu]]) -> tuple[Outcome, PhaseCpu]:
    """One route's turns as one phase: answers and latencies together, times and CPU summed."""
    outcome = Outcome()
    for part, _ in turns:
        outcome.latencies += part.latencies
        outcome.answers += part.answers
        outcome.failures += part.failures
        outcome.elapsed += part.elapsed
    spent = [phase for _, phase in turns]
    cpu = PhaseCpu(*(sum(getattr(phase, name) for phase in spent) for name in PhaseCpu.__dataclass_fields__))
    return outcome, cpu


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def warm_up(port: int, token: str, concurrency: int, progress: Any) -> None:
    """Every worker imports, connects and fingerprints once before anything is timed."""
    bodies = [{"report_id": f"warm-{n}", "source": "crash_kernel", "crashed_at": "2026-11-29T00:00:00Z",
               "host": {"hostname": f"warm-{n}"}, "console_log": "Kernel panic - not syncing: warm up"}
              for n in range(concurrency)]
    requests = [http_request("/api/v1/reports", token, json.dumps(body).encode()) for body in bodies]
    drive(port, requests, 0, concurrency, progress)


# --- checking what was stored --------------------------------------------------------------------


@dataclass(frozen=True)
class Stored:
    """What the storm left in the database: report_id -> event id, events, hosts with an event,
    events answered with a full capture."""

    reports: dict[str, int]
    events: int
    hosts: int
    full: int


def stored_storm(url: str) -> Stored:
    database = Database(url)
    with database.engine.connect() as connection:
        reports = dict(
            connection.execute(text("SELECT report_id, event_id FROM reports WHERE report_id LIKE 'storm-%'"))
            .all()
        )
        events, hosts = connection.execute(
            text("SELECT count(*), count(DISTINCT hostname) FROM events WHERE hostname LIKE 'gpu-%'")
        ).one()
        full = connection.execute(
            text("SELECT count(*) FROM events WHERE hostname LIKE 'gpu-%' AND capture_action = 'full'")
        ).scalar_one()
    database.dispose()
    return Stored(reports, events, hosts, full)


def audit(url: str, outcome: Outcome) -> dict[str, int]:
    """Lost acknowledgements, duplicates and full captures, from the database itself."""
    answers = outcome.parsed_answers()
    acknowledged = {body["report_id"]: answer["event_id"] for body, _, answer in answers}
    events_by_report: dict[str, set[str]] = {}
    for body, _, answer in answers:
        events_by_report.setdefault(body["report_id"], set()).add(answer["event_id"])
    found = stored_storm(url)
    stored, events, full = found.reports, (found.events, found.hosts), found.full
    return {
        "acknowledged": len(acknowledged),
        "lost": sum(1 for report_id in acknowledged if report_id not in stored),
        "wrong_event": sum(1 for rid, event in acknowledged.items() if str(stored.get(rid, event)) != event),
        "duplicates": (events[0] - events[1]) + sum(len(ids) - 1 for ids in events_by_report.values()),
        "full_captures": int(full),
        "answered_full": sum(1 for body, status, answer in answers
                             if status == 201 and answer["capture"]["action"] == "full"),
    }


def print_profile(directory: Path) -> None:
    import pstats

    files = sorted(str(path) for path in directory.glob("worker-*.prof"))
    if files:
        pstats.Stats(*files).sort_stats("cumulative").print_stats(r"registry|flask/app", 40)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] * 1000 if ordered else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--hosts", type=int, default=1500)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--bare-seconds", type=float, default=5.0)
    parser.add_argument("--log", type=Path, default=DEFAULT_LOG, help="console log of the storm's bug")
    parser.add_argument("--turns", type=int, default=6,
                        help="slices of the storm the floor route and the registry take in turn")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--profile", type=Path, help="profile the workers (sync workers) into this folder")
    parser.add_argument("--workers", type=int, help="gunicorn workers (default: cores + 1)")
    parser.add_argument("--threads", type=int,
                        help="threads per worker: 1 sync workers (gunicorn.conf.py's default), more gthread")
    parser.add_argument("--clients", default="both", choices=(*CLIENT_PATTERNS, "both"),
                        help="one connection per report (crash kernels), one kept-alive connection "
                             "per client (a proxy, a pooled agent), or both in turn (default)")
    parser.add_argument("--database-url", help="storm this kept registry (bench/history.py's), and a fresh "
                        "empty one before it in the same run, for the ratio")
    parser.add_argument("--history", type=int, metavar="N",
                        help="as --database-url, bench/history.py's registry of N events (built if missing)")
    args = parser.parse_args()
    if args.history:
        sys.path.insert(0, str(ROOT / "bench"))
        from history import History, ensure

        args.database_url = ensure(History(args.history))
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
        os.environ["CRASHREG_STORM_PROFILE"] = str(args.profile.resolve())
    args.gunicorn = gunicorn_settings(args.workers, 1 if args.profile else args.threads)

    template = args.log.read_text(errors="replace").partition("\n\n")[2] or args.log.read_text()
    bodies = storm_requests(template, args.hosts)
    patterns = CLIENT_PATTERNS if args.clients == "both" else (args.clients,)
    runs = history_runs if args.database_url else run_pattern
    results = {pattern: runs(args, bodies, pattern) for pattern in patterns}
    print(json.dumps({"load_average": os.getloadavg()} | {p: f for p, (f, _) in results.items()}, indent=2))
    headlines = {}
    for pattern, (figures, _) in results.items():
        for failure in figures.pop("first_errors"):
            print(f"error ({pattern}):", failure)
        empty = figures.get("empty")
        headlines[pattern] = (f"{pattern}, on history: throughput {figures['rps_x_empty']:.2f} x the empty "
                              f"registry's ({empty['storm_rps']:.0f} req/s), p99 {empty['p99_ms']:.0f} ms "
                              "there. " if empty else "") + (
            f"{pattern}: CPU a report {figures['cpu_x_floor']:.2f} x the floor route's, throughput "
            f"{figures['rps_x_floor']:.2f} x, p99 {figures['p99_ms']:.0f} ms (floor route: "
            f"{figures['floor_p99_ms']:.0f} ms), load average at its start {figures['load_average_at_start']}"
        )
    return verdict(results, headlines, args.json)


def history_runs(
    args: Any, bodies: list[dict[str, Any]], pattern: str
) -> tuple[dict[str, Any], dict[str, bool]]:
    """The storm on an empty registry, then on the kept one (`--database-url`): the kept one's
    figures and goals, with its throughput against the empty one's of the same run (issue 43:
    at least 0.9x)."""
    empty, _ = run_pattern(args, bodies, pattern)
    empty.pop("first_errors")
    figures, goals = run_pattern(args, bodies, pattern, args.database_url)
    figures |= {"empty": empty, "rps_x_empty": round(figures["storm_rps"] / empty["storm_rps"], 3)}
    goals[f"throughput >= {GOALS['rps_x_empty']} x the empty registry's"] = (
        figures["rps_x_empty"] >= GOALS["rps_x_empty"])
    return figures, goals


Results = dict[str, tuple[dict[str, Any], dict[str, bool]]]  # per client pattern: figures, goals


def verdict(results: Results, headlines: dict[str, str], json_out: Path | None) -> int:
    """Each client pattern's headline and PASS or MISS per goal, the figures written to
    `json_out`; the exit status (1 when a goal is missed)."""
    for pattern, (_, goals) in results.items():
        print(headlines[pattern])
        for goal, met in goals.items():
            print(f"{'PASS' if met else 'MISS'}  {pattern:10s}  {goal}")
    if json_out:
        written = {pattern: figures | {"goals": goals} for pattern, (figures, goals) in results.items()}
        json_out.write_text(json.dumps(written, indent=2) + "\n")
    return 0 if all(all(goals.values()) for _, goals in results.values()) else 1


def run_pattern(
    args: Any, bodies: list[dict[str, Any]], pattern: str, history: str | None = None
) -> tuple[dict[str, Any], dict[str, bool]]:
    """One storm with one client pattern, on a fresh database (or the kept registry `history`,
    cleared of earlier storms) and a fresh gunicorn, so that K full captures and the audit hold
    for each pattern alike."""
    keep_alive = pattern == "keep-alive"
    load_at_start = os.getloadavg()[0]
    database = history_database(history) if history else fresh_database()
    with database as (url, token), serving(url, args.gunicorn["workers"], token, args.concurrency,
                                                   pattern) as (server, port):
        settings = Settings(database_url=url)
        bare_length = int(args.bare_seconds * 3000)
        sent = [json.dumps(body).encode() for body in bodies]
        with click.progressbar(length=bare_length, label=f"{pattern:10s} bare route ") as bar:
            repeat = http_request("/bare/", token, sent[0], keep_alive)
            bare, bare_cpu = measured(server, url, lambda: drive(
                port, None, args.bare_seconds, args.concurrency, bar, repeat=repeat, keep_alive=keep_alive
            ))

        routes = ("/floor/", "/api/v1/reports")
        requests = {route: [http_request(route, token, body, keep_alive) for body in sent]
                    for route in routes}
        turns: dict[str, list[tuple[Outcome, PhaseCpu]]] = {route: [] for route in routes}
        with click.progressbar(length=2 * len(bodies), label=f"{pattern:10s} floor route, storm") as progress:
            for start, end in turn_bounds(len(bodies), args.turns):
                for route in routes:
                    turns[route].append(measured(server, url, lambda r=route, s=start, e=end: drive(
                        port, requests[r][s:e], 0, args.concurrency, progress,
                        keep_alive=keep_alive, bodies=bodies[s:e],
                    )))
        (floor, floor_cpu), (storm, storm_cpu) = (joined(turns[route]) for route in routes)
        rss = {pid: round(peak_rss_mb(pid), 1) for pid in worker_pids(server.pid)}
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
        checks = audit(url, storm)
    if args.profile:
        print_profile(args.profile)

    bare_rate = len(bare.latencies) / bare.elapsed
    storm_rate = len(storm.latencies) / storm.elapsed
    floor_rate = len(floor.latencies) / floor.elapsed
    figures = {
        "date": datetime.now(UTC).date().isoformat(),
        "clients": pattern,
        "cpus": os.cpu_count(),
        "load_average_at_start": round(load_at_start, 2),
        **args.gunicorn,
        "concurrency": args.concurrency,
        "hosts": args.hosts,
        "requests": len(bodies),
        "resends": len(bodies) - args.hosts,
        "bare_rps": round(bare_rate, 1),
        "bare_p50_ms": round(percentile(bare.latencies, 0.50), 1),
        "bare_p99_ms": round(percentile(bare.latencies, 0.99), 1),
        "floor_rps": round(floor_rate, 1),
        "floor_ratio": round(floor_rate / bare_rate, 3),
        "floor_p99_ms": round(percentile(floor.latencies, 0.99), 1),
        "floor_worker_cpu_ms_per_request": round(floor_cpu.workers / len(floor.latencies) * 1000, 2),
        "floor_postgres_cpu_ms_per_request": round(floor_cpu.postgres / len(floor.latencies) * 1000, 2),
        "storm_rps": round(storm_rate, 1),
        "ratio": round(storm_rate / bare_rate, 3),
        "p50_ms": round(percentile(storm.latencies, 0.50), 1),
        "p99_ms": round(percentile(storm.latencies, 0.99), 1),
        "bare_worker_cpu_ms_per_request": round(bare_cpu.workers / len(bare.latencies) * 1000, 2),
        "storm_worker_cpu_ms_per_request": round(storm_cpu.workers / len(storm.latencies) * 1000, 2),
        "storm_postgres_cpu_ms_per_request": round(storm_cpu.postgres / len(storm.latencies) * 1000, 2),
        "storm_client_cpu_ms_per_request": round(storm_cpu.client / len(storm.latencies) * 1000, 2),
        "cpu_ratio": round(
            (bare_cpu.workers / len(bare.latencies))
            / ((storm_cpu.workers + storm_cpu.postgres) / len(storm.latencies)),
            3,
        ),
        "cpu_x_floor": round(
            ((storm_cpu.workers + storm_cpu.postgres) / len(storm.latencies))
            / ((floor_cpu.workers + floor_cpu.postgres) / len(floor.latencies)),
            3,
        ),
        "rps_x_floor": round(storm_rate / floor_rate, 3),
        "errors": len(storm.failures) + len(bare.failures) + len(floor.failures),
        "k": settings.full_captures_per_window,
        **checks,
        "worker_peak_rss_mb": list(rss.values()),
        "first_errors": (storm.failures + bare.failures + floor.failures)[:5],
    }
    goals = {
        f"CPU a report (workers + PostgreSQL) <= {GOALS['cpu_x_floor']} x the floor route's": (
            figures["cpu_x_floor"] <= GOALS["cpu_x_floor"]
        ),
        "throughput >= 2/3 x the floor route's": figures["rps_x_floor"] >= GOALS["rps_x_floor"],
        f"p99 < {GOALS['p99_ms']:.0f} ms": figures["p99_ms"] < GOALS["p99_ms"],
        f"worker RSS < {GOALS['rss_mb']:.0f} MB": max(rss.values()) < GOALS["rss_mb"],
        "no lost acknowledgement": checks["lost"] == 0 and checks["wrong_event"] == 0,
        "no duplicate": checks["duplicates"] == 0,
        "exactly K full captures": checks["full_captures"] == figures["k"] == checks["answered_full"],
        "no error": figures["errors"] == 0,
    }
    return figures, goals


if __name__ == "__main__":
    sys.exit(main())
