"""The contract's error shape: {"error": {"code", "message", "fields"}}."""

from __future__ import annotations

from typing import Any

from flask import Flask, jsonify
from sqlalchemy.exc import DBAPIError, OperationalError
from werkzeug.exceptions import HTTPException

from registry.db import LOCK_NOT_AVAILABLE


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        fields: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.fields = fields or {}
        self.headers = headers or {}

    def to_response(self) -> Any:
        body = {"error": {"code": self.code, "message": self.message, "fields": self.fields}}
        response = jsonify(body)
        response.status_code = self.status
        response.headers.update(self.headers)
        return response


DATABASE_RETRY_AFTER_S = 5
HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "body_too_large",
    414: "uri_too_long",
    415: "unsupported_media_type",
    429: "rate_limited",
    503: "unavailable",
}
# SQLSTATE class 54 (PostgreSQL): a statement exceeded a limit, e.g. an index entry's size.
PROGRAM_LIMIT_EXCEEDED = "54"
# What a retryable 503 says, by what the driver said (PostgreSQL's SQLSTATE, SQLite's result code):
# a lock not free within the wait (CRASHREG_INGEST_LOCK_WAIT_S), else the database is unavailable.
UNAVAILABLE_BECAUSE = {
    LOCK_NOT_AVAILABLE: "a table this request writes is locked by another transaction (an ALTER TABLE, "
    "LOCK TABLE, VACUUM FULL or migration) and was not free in time; nothing was stored; retry shortly",
    "SQLITE_BUSY": "the registry's database is locked by another writer (a migration, a job, a sqlite3 "
    "shell) and was not free in time; nothing was stored; retry shortly",
}
DATABASE_UNAVAILABLE = "the registry's database is unavailable; retry shortly"


def driver_code(error: DBAPIError) -> str:
    """What the driver calls a database error: PostgreSQL's SQLSTATE, SQLite's result code name."""
    orig = error.orig
    return getattr(getattr(orig, "diag", None), "sqlstate", None) or getattr(orig, "sqlite_errorname", "")


def install_error_handlers(app: Flask) -> None:
    @app.errorhandler(ApiError)
    def _api_error(error: ApiError) -> Any:
        return error.to_response()

    @app.errorhandler(OperationalError)
    def _database_unavailable(error: OperationalError) -> Any:
        code = driver_code(error)
        if code.startswith(PROGRAM_LIMIT_EXCEEDED):
            # A value too large to store or index: retrying cannot help, so no 503.
            app.logger.warning("value too large to store: %s", error.orig)
            return ApiError(
                422, "too_large", f"a value is too large to store: {str(error.orig).splitlines()[0]}"
            ).to_response()
        # Unreachable, restarting, overloaded or locked database: the transaction rolled back
        # whole, so the caller may safely retry (reports are idempotent on report_id).
        app.logger.warning("database unavailable: %s %s", type(error.orig).__name__, code)
        return ApiError(
            503,
            "unavailable",
            UNAVAILABLE_BECAUSE.get(code, DATABASE_UNAVAILABLE),
            headers={"Retry-After": str(DATABASE_RETRY_AFTER_S)},
        ).to_response()

    @app.errorhandler(DBAPIError)
    def _database_error(error: DBAPIError) -> Any:
        if error.connection_invalidated:
            return _database_unavailable(error)  # type: ignore[arg-type]
        raise error

    @app.errorhandler(HTTPException)
    def _http_error(error: HTTPException) -> Any:
        status = error.code or 500
        message = error.description or error.name
        if status == 413:
            message = f"request body is larger than {app.config['MAX_CONTENT_LENGTH']} bytes"
        # Keep what the exception says in headers (a 405's Allow), not its HTML content type.
        headers = {name: value for name, value in error.get_headers() if name.lower() != "content-type"}
        return ApiError(status, HTTP_CODES.get(status, "error"), message, headers=headers).to_response()
