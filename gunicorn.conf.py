"""gunicorn settings for production: `gunicorn registry.wsgi:app` picks this file up."""

import multiprocessing
import os
import tempfile

bind = os.environ.get("CRASHREG_BIND", "0.0.0.0:8080")
workers = int(os.environ.get("CRASHREG_WORKERS", multiprocessing.cpu_count() * 2 + 1))
worker_class = "gthread"
threads = int(os.environ.get("CRASHREG_THREADS", 4))
# A gthread worker accepts up to worker_connections clients and queues the ones its threads
# are not serving; with gunicorn's default (1000) a crash storm piles onto whichever worker
# accepted first while others idle, and the slowest crash kernels wait longest (p99 2.4-4.3x
# p50 in bench/storm.py). Accepting only what the threads can serve leaves the rest in the
# kernel's accept queue, shared by all workers: p99 1.4-2.0x p50 at the same throughput.
# Idle keep-alive clients count too, hence the margin.
worker_connections = int(os.environ.get("CRASHREG_WORKER_CONNECTIONS", threads + 1))
timeout = 60
graceful_timeout = 30
keepalive = 5
max_requests = 10_000  # recycle workers now and then; jitter keeps them from restarting together
max_requests_jitter = 1_000
accesslog = None  # the app writes one JSON line per request itself
errorlog = "-"

# Prometheus metrics merged across workers.
os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", tempfile.mkdtemp(prefix="crashreg-metrics-"))


def child_exit(server, worker):
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)
