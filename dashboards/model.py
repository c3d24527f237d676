"""Plain builders for Grafana dashboard JSON (classic model, schemaVersion 39, Grafana 11).

Panels are declared as data (title, kind, queries, size); `dashboard()` lays them out on
Grafana's 24-column grid and renders each query into the target shape of the dashboard's
SQL dialect (see `dashboards.dialects`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypedDict

from dashboards.dialects import Dialect

SCHEMA_VERSION = 39
GRID_WIDTH = 24
GRAFANA_DATASOURCE = {"type": "grafana", "uid": "-- Grafana --"}


class Dashboard(TypedDict):
    """A dashboard in Grafana's JSON model as crashreg writes it; the panels, variables and
    annotations inside are Grafana's own objects."""

    uid: str
    title: str
    description: str
    tags: list[str]
    timezone: str
    editable: bool
    graphTooltip: int
    time: dict[str, str]
    refresh: str
    schemaVersion: int
    panels: list[dict[str, Any]]
    templating: dict[str, list[dict[str, Any]]]
    annotations: dict[str, list[dict[str, Any]]]
    links: list[dict[str, Any]]


@dataclass(frozen=True)
class Query:
    """One SQL query of a panel; `time_columns` are epoch/time columns to render as time."""

    sql: str
    table: bool = False
    time_columns: tuple[str, ...] = ("time",)


@dataclass(frozen=True)
class Link:
    """A data link on a panel's values; `url` may use `${__data.fields.X}` of the clicked row.

    Rendered in the shape of the schema's DashboardLink (a superset of Grafana's data link),
    on the field defaults: clicking any cell of a row offers every link of the panel.
    """

    title: str
    url: str

    def as_json(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "type": "link",
            "url": self.url,
            "icon": "external link",
            "tooltip": self.title,
            "tags": [],
            "asDropdown": False,
            "targetBlank": True,
            "includeVars": False,
            "keepTime": False,
        }


@dataclass(frozen=True)
class Panel:
    title: str
    kind: str
    queries: tuple[Query, ...]
    width: int = 12
    height: int = 8
    description: str = ""
    unit: str | None = None
    links: tuple[Link, ...] = ()
    options: dict[str, Any] = field(default_factory=dict)


def _field_config(panel: Panel) -> dict[str, Any]:
    defaults: dict[str, Any] = {}
    if panel.unit:
        defaults["unit"] = panel.unit
    if panel.links:
        defaults["links"] = [link.as_json() for link in panel.links]
    return {"defaults": defaults, "overrides": []}


def _panels(panels: tuple[Panel, ...], dialect: Dialect) -> list[dict[str, Any]]:
    rendered, x, y, row_height = [], 0, 0, 0
    for panel_id, panel in enumerate(panels, start=1):
        if x + panel.width > GRID_WIDTH:
            x, y, row_height = 0, y + row_height, 0
        rendered.append(
            {
                "id": panel_id,
                "type": panel.kind,
                "title": panel.title,
                "description": panel.description,
                "datasource": dialect.datasource,
                "gridPos": {"h": panel.height, "w": panel.width, "x": x, "y": y},
                "targets": [
                    dialect.target(chr(ord("A") + index), query) for index, query in enumerate(panel.queries)
                ],
                "fieldConfig": _field_config(panel),
                "options": dict(panel.options),
            }
        )
        x += panel.width
        row_height = max(row_height, panel.height)
    return rendered


def dashboard(
    uid: str,
    title: str,
    description: str,
    panels: tuple[Panel, ...],
    dialect: Dialect,
    variables: tuple[dict[str, Any], ...] = (),
    annotations: tuple[dict[str, Any], ...] = (),
) -> Dashboard:
    """A complete dashboard; the time range defaults to the last 30 days."""
    builtin = {
        "builtIn": 1,
        "datasource": GRAFANA_DATASOURCE,
        "enable": True,
        "hide": True,
        "iconColor": "rgba(0, 211, 255, 1)",
        "name": "Annotations & Alerts",
        "type": "dashboard",
    }
    return {
        "uid": uid,
        "title": title,
        "description": description,
        "tags": ["crashreg"],
        "timezone": "utc",
        "editable": True,
        "graphTooltip": 1,
        "time": {"from": "now-30d", "to": "now"},
        "refresh": "5m",
        "schemaVersion": SCHEMA_VERSION,
        "panels": _panels(panels, dialect),
        "templating": {"list": list(variables)},
        "annotations": {"list": [builtin, *annotations]},
        "links": [],
    }
