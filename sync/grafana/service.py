"""Provisioning as the CLI and the scheduler run it: role, then Grafana, then annotations."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from dashboards import FOLDER_UID, build_dashboards
from dashboards.alert_model import RuleGroup
from dashboards.alerts import build_rule_group
from dashboards.dialects import DIALECTS
from dashboards.model import Dashboard
from registry.config import Settings
from registry.db import Database
from sync.grafana.alerting import AlertProvisioner
from sync.grafana.annotations import push_annotations
from sync.grafana.datasource import datasource_spec, dialect_name, grafana_db_url
from sync.grafana.provision import Outcome, Provisioner, ProvisionReport, connect
from sync.grafana.role import RoleReport, ensure_readonly_role
from sync.grafana.rollups import refresh_rollups

log = logging.getLogger("crashreg.grafana")


class GrafanaNotConfigured(RuntimeError):
    pass


@dataclass
class ProvisionResult:
    role: RoleReport | None
    report: ProvisionReport


def alert_rule_group(settings: Settings, dashboards: list[Dashboard]) -> RuleGroup:
    """crashreg's rule group for this registry's database and settings."""
    dialect = DIALECTS[dialect_name(settings)]
    return build_rule_group(
        dialect, settings.public_url, settings.alerts, settings.jira.enabled, dashboards, FOLDER_UID
    )


def check_configured(settings: Settings) -> None:
    if not settings.grafana.enabled:
        raise GrafanaNotConfigured("set CRASHREG_GRAFANA_URL and CRASHREG_GRAFANA_TOKEN")


def provision(
    settings: Settings,
    database: Database,
    force: bool = False,
    progress: Callable[[Outcome], None] | None = None,
    refresh: bool = True,
) -> ProvisionResult:
    """Role (PostgreSQL), rollups (unless the scheduler's rollup job owns them), Grafana:
    folder, data source, dashboards, then the alert rule group."""
    check_configured(settings)
    dialect = dialect_name(settings)
    role = (
        ensure_readonly_role(database.engine, grafana_db_url(settings, database))
        if dialect == "postgresql"
        else None
    )
    if refresh:
        refresh_rollups(database)
    api = connect(settings.grafana.url or "", settings.grafana.token or "")
    dashboards = build_dashboards(dialect, settings.public_url)
    spec = datasource_spec(settings, database)
    report = Provisioner(api, database, force=force).run(spec, dashboards, progress)
    alerts = AlertProvisioner(api, database, force=force)
    for outcome in alerts.run(alert_rule_group(settings, dashboards), progress):
        report.add(outcome)
    return ProvisionResult(role, report)


def scheduled_sync(settings: Settings, database: Database) -> dict[str, int]:
    """The scheduler job: keep the data source and dashboards in place, push new annotations.

    Dashboards edited in Grafana are kept (and logged); a Grafana outage raises, and the
    scheduler runs the job again at its next interval (annotations resume where they stopped).
    """
    result = provision(settings, database, refresh=False)  # the grafana-rollups job refreshes
    for outcome in result.report.outcomes:
        if outcome.action != "unchanged":
            log.info("grafana %s", outcome.line())
    api = connect(settings.grafana.url or "", settings.grafana.token or "")
    pushed = push_annotations(api, database)
    return {
        "changed": sum(o.action != "unchanged" for o in result.report.outcomes),
        "kept_edited": len(result.report.by_action("kept-edited")),
        "annotations": len(pushed),
    }
