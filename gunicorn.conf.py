"""gunicorn settings for production: `gunicorn registry.wsgi:app` picks this file up."""

import multiprocessing
import os
import tempfile

bind = os.environ.get("CRASHREG_BIND", "0.0.0.0:8080")
workers = int(os.environ.get("CRASHREG_WORKERS", multiprocessing.cpu_count() * 2 + 1))
worker_class = "gthread"
threads = int(os.environ.get("CRASHREG_THREADS", 4))
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
