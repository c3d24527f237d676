"""Liveness, readiness, metrics and the OpenAPI document."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, current_app, jsonify
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from registry.metrics import render, replica_metrics
from registry.migrate import current_revisions, known_revisions
from registry.openapi import build_spec
from registry.web import current_db

blueprint = Blueprint("operations", __name__)


@blueprint.get("/healthz")
def healthz() -> Any:
    return jsonify({"status": "ok"})


@blueprint.get("/readyz")
def readyz() -> Any:
    db = current_db()
    try:
        with db.engine.connect() as connection:
            connection.execute(text("SELECT 1"))
        current = current_revisions(db.engine)
    except SQLAlchemyError as error:
        return jsonify({"status": "unavailable", "database": f"unreachable: {type(error).__name__}"}), 503
    heads = current_app.config["CRASHREG_MIGRATION_HEADS"]
    if current != heads:
        return jsonify(
            {
                "status": "unavailable",
                "database": "reachable",
                "migrations": {"current": sorted(current), "head": sorted(heads)},
                "hint": "run: crashreg db upgrade" if current <= known_revisions() else
                "the database is at a later release's migrations: deploy that release (docs/upgrading.md)",
            }
        ), 503
    body: dict[str, Any] = {"status": "ready", "database": "reachable", "migrations": sorted(current)}
    if db.replica is not None:  # a replica out of use sends reads to the primary: ready still
        body["read_replica"] = db.replica.health().describe()
    return jsonify(body)


@blueprint.get("/metrics")
def metrics() -> Any:
    db = current_db()
    collectors = current_app.extensions["crashreg.collectors"]
    if db.replica is not None:
        collectors = [*collectors, replica_metrics(db.replica)]
    with db.session() as session:
        body, content_type = render(session, collectors)
    return Response(body, content_type=content_type)


@blueprint.get("/api/v1/openapi.json")
def openapi() -> Any:
    if "CRASHREG_OPENAPI" not in current_app.config:
        current_app.config["CRASHREG_OPENAPI"] = build_spec(current_app)
    return jsonify(current_app.config["CRASHREG_OPENAPI"])
