"""The Flask application factory: blueprints of every domain, errors, request logs, metrics."""

from __future__ import annotations

import functools
import json
import logging
import sys
import time
import uuid

from flask import Flask, Response, g, request
from flask.logging import default_handler

from registry.config import Settings
from registry.core.wiring import APP_ENGINE, APP_LISTENERS, Wiring, load
from registry.db import Database, missing_sqlite_file, no_database
from registry.domains import wiring
from registry.errors import install_error_handlers
from registry.metrics import REQUESTS
from registry.migrate import head_revisions
from registry.operations import blueprint as operations_blueprint
from registry.requests import IdConverter, refuse_nul_in_request
from registry.web import remember_writes

access_log = logging.getLogger("crashreg.access")


class JsonLogFormatter(logging.Formatter):
    """One JSON object per line: what log shippers and `jq` want."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": _local_time(int(record.created)),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update(getattr(record, "fields", {}))
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


@functools.lru_cache(maxsize=2)
def _local_time(second: int) -> str:
    """A log line's time (second resolution), formatted once a second rather than once a line."""
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(second))


def configure_logging(app: Flask | None = None) -> None:
    """crashreg's loggers write JSON lines to stderr; so does `app`'s own logger (Flask's, for
    errors its handlers log: a store or database failure, an unhandled exception's traceback),
    instead of Flask's plain text among them."""
    root = logging.getLogger("crashreg")
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(JsonLogFormatter())
        root.addHandler(handler)
        root.setLevel(logging.INFO)
        root.propagate = False
    if app is not None:
        app.logger.removeHandler(default_handler)
        if not any(isinstance(handler.formatter, JsonLogFormatter) for handler in app.logger.handlers):
            app.logger.addHandler(root.handlers[0])


def serving_problem() -> str | None:
    """Why the registry cannot serve with this environment's settings (None: it can), in one
    line: a refused setting, or a SQLite file that is not there, which opening would create
    empty (a mistyped path then looks like a database waiting for `crashreg db upgrade`)."""
    try:
        settings = Settings.from_env()
    except ValueError as error:
        return str(error)
    missing = missing_sqlite_file(settings.database_url)
    return no_database(str(missing)) if missing is not None else None


def create_app(
    settings: Settings | None = None, database: Database | None = None, wired: Wiring | None = None
) -> Flask:
    """The registry's WSGI app; `wired`: the domains' wiring (default: registry.domains.wiring())."""
    settings = settings or Settings.from_env()
    app = Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = settings.max_body_bytes
    app.config["CRASHREG_MIGRATION_HEADS"] = head_revisions()
    app.extensions["crashreg.settings"] = settings
    app.extensions["crashreg.db"] = database or Database(
        settings.database_url, settings.read_replica, lock_wait_s=settings.ingest_lock_wait_s
    )
    app.json.sort_keys = False  # type: ignore[attr-defined]
    configure_logging(app)
    app.url_map.converters["id"] = IdConverter
    install_error_handlers(app)
    wired = wired or wiring()
    app.extensions["crashreg.collectors"] = [load(collector) for collector in wired.collectors]
    app.extensions[APP_LISTENERS] = wired.signatures
    engine = load(wired.engine)
    app.extensions[APP_ENGINE] = load(wired.symbolication)(app, engine) if wired.symbolication else engine
    app.register_blueprint(operations_blueprint)
    for blueprint in wired.blueprints:
        app.register_blueprint(load(blueprint))
    app.before_request(_start_request)
    app.before_request(refuse_nul_in_request)
    app.after_request(_log_request)
    if app.extensions["crashreg.db"].replica is not None:
        app.after_request(remember_writes)
    return app


def _start_request() -> None:
    g.request_id = request.environ.get("HTTP_X_REQUEST_ID", "")[:64] or uuid.uuid4().hex
    g.started = time.perf_counter()


def _log_request(response: Response) -> Response:
    served = request._get_current_object()  # type: ignore[attr-defined]  # once, not per field
    endpoint = served.url_rule.rule if served.url_rule else "unmatched"
    REQUESTS.labels(endpoint, served.method, str(response.status_code)).inc()
    request_id = g.get("request_id") or uuid.uuid4().hex  # none when the request failed before its hooks
    response.headers["X-Request-Id"] = request_id
    if not access_log.isEnabledFor(logging.INFO):
        return response
    token = getattr(g, "token", None)
    now = time.perf_counter()
    fields = {
        "request_id": request_id,
        "method": served.method,
        "path": served.path,
        "endpoint": endpoint,
        "status": response.status_code,
        "duration_ms": round((now - g.get("started", now)) * 1000, 2),
        "remote": served.remote_addr,
        "token": token.name if token is not None else None,
    }
    # The record made and handled as Logger.info does, less its stack walk for the caller's
    # file and line, which the JSON line does not carry.
    record = access_log.makeRecord(
        access_log.name, logging.INFO, "", 0, "request", (), None, extra={"fields": fields}
    )
    access_log.handle(record)
    return response
