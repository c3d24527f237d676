"""gunicorn settings for production: `gunicorn registry.wsgi:app` picks this file up."""

import json
import multiprocessing
import os
import sys
import tempfile

from gunicorn import util


def setting(name: str, default: str | int) -> str:
    """An environment variable; unset, empty or blank: the default (as registry/config.py reads)."""
    return os.environ.get(name, "").strip() or str(default)


bind = setting("CRASHREG_BIND", "0.0.0.0:8080")
# Sync workers, one request at a time each, one per core and one more. A report is CPU-bound
# Python (parse, fingerprint, one transaction), so threads in one process only take turns on its
# GIL: a thread back from a PostgreSQL round trip waits for the running one's switch interval,
# eight round trips a report, and which report gets the GIL next is arbitrary. Processes are
# scheduled by the kernel instead and take connections from the shared accept queue in arrival
# order: in the same sittings, sync workers had p99/p50 1.1-1.4 where 4 x 4 gthread threads had
# 1.4-1.8, at less CPU per report (bench/README.md, "Crash storm"). One more than the cores, so
# a worker waiting on PostgreSQL (a commit's WAL flush) leaves its core to another; more only
# cost CPU per report in context switches and caches (2, 3, 4 and 5 on 2 cores: 3 had the least
# CPU per report and no worse a p99).
# A sync worker reads a request whole before it serves the next, and a slow page holds it while
# it renders. Crash kernels and DPU agents send at the fleet network's speed; slowly sending
# clients (a WAN, a trickling proxy) need a buffering proxy in front, or gthread workers, which
# keep serving while one thread waits (CRASHREG_THREADS above 1); where people browse the pages
# on the same servers, the proxy routes POST /api/v1/reports to a gunicorn of its own.
workers = int(setting("CRASHREG_WORKERS", multiprocessing.cpu_count() + 1))
threads = int(setting("CRASHREG_THREADS", 1))
worker_class = "sync" if threads == 1 else "gthread"
# Sync workers answer every request with "Connection: close"; so do gthread workers by default.
# A gthread worker counts an idle keep-alive connection against worker_connections, so 64
# clients that keep their connection (a proxy, an agent with a pool) hold the workers' few
# slots while idle and the others wait in the accept queue until an idle one times out: storm
# p99 3.6 s at p50 0.21 s with keep-alive 5 s. Closing after each answer costs a TCP handshake
# per report (loopback/LAN: well under a millisecond) and makes both client patterns alike;
# clients and proxies reconnect on "Connection: close" by themselves.
keepalive = int(setting("CRASHREG_KEEPALIVE", 0))
# gthread only: a worker accepts up to worker_connections clients and queues the ones its
# threads are not serving; with gunicorn's default (1000) a storm piles onto whichever worker
# accepted first while others idle (p99 2.4-4.3x p50). Accepting only what the threads serve
# leaves the rest in the kernel's accept queue, shared by all workers; with keep-alive on, an
# idle kept connection counts too, hence a margin of one.
worker_connections = int(setting("CRASHREG_WORKER_CONNECTIONS", threads + (1 if keepalive else 0)))
timeout = 60
graceful_timeout = 30
max_requests = 10_000  # recycle workers now and then; jitter keeps them from restarting together
max_requests_jitter = 1_000
accesslog = None  # the app writes one JSON line per request itself
errorlog = "-"
# gunicorn's control socket is one path per user by default ($HOME/.gunicorn/gunicorn.ctl):
# a second gunicorn on the host (a registry for the pages beside one for reports, a bench)
# takes it over from the first. Off unless CRASHREG_CONTROL_SOCKET names one of its own.
control_socket = setting("CRASHREG_CONTROL_SOCKET", "") or None
control_socket_disable = control_socket is None

# Prometheus metrics merged across workers.
os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", tempfile.mkdtemp(prefix="crashreg-metrics-"))


def on_starting(server):
    """A refused setting or a missing database stops the master with one line, before any
    worker prints its traceback of the same error."""
    from registry.app import serving_problem

    problem = serving_problem()
    if problem is not None:
        server.log.error("crashreg cannot start: %s", problem)
        sys.exit(1)


def post_worker_init(worker):
    """The app is loaded: its modules, mappers and tables are there for the worker's life, so
    the cyclic garbage collector stops walking them (gc.freeze). A full collection of a loaded
    worker otherwise takes 70-90 ms here, and 150-260 ms once requests have run, all of it a
    pause of the report that worker is serving."""
    import gc

    from sqlalchemy.orm import configure_mappers

    configure_mappers()  # done lazily by the first query otherwise, after the freeze
    gc.collect()
    gc.freeze()


def child_exit(server, worker):
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)


def json_error(sock, status_int, reason, mesg):
    """gunicorn's own refusals (a request line past limit_request_line: 414, a malformed
    request: 400, headers too large: 431) in the API's error shape, not an HTML page: what
    answers a client is JSON whoever refuses it. Same status, reason and message as gunicorn's."""
    code = reason.lower().replace(" ", "_").replace("-", "_")
    body = json.dumps({"error": {"code": code, "message": mesg, "fields": {}}}).encode()
    head = (
        f"HTTP/1.1 {status_int} {reason}\r\nConnection: close\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    util.write_nonblock(sock, head.encode("latin-1") + body)


util.write_error = json_error  # the workers' handle_error calls util.write_error
