"""gunicorn settings for production: `gunicorn registry.wsgi:app` picks this file up."""

import json
import multiprocessing
import os
import tempfile

from gunicorn import util

bind = os.environ.get("CRASHREG_BIND", "0.0.0.0:8080")
workers = int(os.environ.get("CRASHREG_WORKERS", multiprocessing.cpu_count() * 2 + 1))
worker_class = "gthread"
threads = int(os.environ.get("CRASHREG_THREADS", 4))
# No keep-alive by default: every answer says "Connection: close". A gthread worker counts an
# idle keep-alive connection against worker_connections, so 64 clients that keep their connection
# (a proxy, an agent with a pool) hold the workers' few slots while idle and the others wait in
# the accept queue until an idle one times out: storm p99 3.6 s at p50 0.21 s (p99/p50 17x) with
# keep-alive 5 s. Raising worker_connections instead brings back the piling-up below. Closing
# after each answer costs a TCP handshake per report (loopback/LAN: well under a millisecond)
# and makes both patterns alike: p99/p50 1.64x keep-alive, 1.69x one-shot in the same run.
# Clients and proxies reconnect on "Connection: close" by themselves. gthread rather than sync
# workers: 8 or 12 sync workers cost more CPU per report than 4 x 4 threads on 2 cores and had a
# longer tail in the same runs. The absolute p99 of 64 closed-loop clients is bounded below by
# the CPU a report costs, not by any setting here: at W ms of worker and PostgreSQL CPU a report,
# 2 cores make at most 2000 / W reports/s, so 64 in flight wait at least 64 x W / 2000 s on
# average (Little's law; W was 7.1 on the quiet machine before the token moved into ingest's
# one read, ~6.3 by same-run ratios after it, bench/README.md).
# Measure: .venv/bin/python bench/storm.py (both patterns; CRASHREG_KEEPALIVE=5 for the old one)
keepalive = int(os.environ.get("CRASHREG_KEEPALIVE", 0))
# A gthread worker accepts up to worker_connections clients and queues the ones its threads
# are not serving; with gunicorn's default (1000) a crash storm piles onto whichever worker
# accepted first while others idle, and the slowest crash kernels wait longest (p99 2.4-4.3x
# p50 in bench/storm.py). Accepting only what the threads can serve leaves the rest in the
# kernel's accept queue, shared by all workers: p99 1.4-2.0x p50 at the same throughput. With
# keep-alive on, idle kept connections count too, hence a margin of one; without it, a margin
# only parks one more client inside a worker whose threads are all busy while another worker's
# thread may be free: threads alone gave more reports/s and a lower p99 in each of four
# same-run pairs (bench/README.md).
worker_connections = int(os.environ.get("CRASHREG_WORKER_CONNECTIONS", threads + (1 if keepalive else 0)))
timeout = 60
graceful_timeout = 30
max_requests = 10_000  # recycle workers now and then; jitter keeps them from restarting together
max_requests_jitter = 1_000
accesslog = None  # the app writes one JSON line per request itself
errorlog = "-"

# Prometheus metrics merged across workers.
os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", tempfile.mkdtemp(prefix="crashreg-metrics-"))


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
