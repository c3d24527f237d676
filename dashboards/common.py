"""Pieces every crashreg dashboard shares: annotations, the registry link, bucket tables."""

from __future__ import annotations

from typing import Any

from dashboards.model import GRAFANA_DATASOURCE, Link, Panel, Query

# Grafana annotations the scheduler pushes (sync.grafana.annotations), one toggle per kind.
ANNOTATION_KINDS = (
    ("First sightings", "first-seen", "blue"),
    ("Regressions", "regression", "red"),
    ("Kernel rollouts", "kernel-rollout", "purple"),
)
ANNOTATION_TAG = "crashreg"
# Pie charts of a table query: one slice per row.
PIE_OPTIONS: dict[str, Any] = {"reduceOptions": {"values": True, "calcs": ["lastNotNull"]}}


def annotations() -> tuple[dict[str, Any], ...]:
    return tuple(
        {
            "name": name,
            "datasource": GRAFANA_DATASOURCE,
            "enable": True,
            "hide": False,
            "iconColor": color,
            "target": {
                "type": "tags",
                "tags": [ANNOTATION_TAG, kind],
                "matchAny": False,
                "limit": 500,
            },
        }
        for name, kind, color in ANNOTATION_KINDS
    )


def registry_url_variable(public_url: str) -> dict[str, Any]:
    """A hidden constant holding CRASHREG_PUBLIC_URL, for links to the registry's pages."""
    return {
        "type": "constant",
        "name": "registry_url",
        "hide": 2,
        "query": public_url,
        "current": {"text": public_url, "value": public_url},
        "skipUrlSync": True,
    }


SIGNATURE_LINK = Link(
    "Open the signature in crashreg", "${registry_url}/signatures/${__data.fields.signature_id}"
)
JIRA_LINK = Link("Open the Jira issue", "${__data.fields.jira_url}")


def labelled_buckets(value: str, bounds: tuple[tuple[float | None, str], ...]) -> tuple[str, str]:
    """Two CASE expressions from a bucket table: the bucket's rank and its label."""
    rank = " ".join(
        f"WHEN {value} < {bound} THEN {index}" for index, (bound, _) in enumerate(bounds) if bound
    )
    rank_sql = f"CASE WHEN {value} IS NULL THEN {len(bounds)} {rank} ELSE {len(bounds) - 1} END"
    labels = " ".join(f"WHEN {index} THEN '{label}'" for index, (_, label) in enumerate(bounds))
    label_sql = f"CASE bucket {labels} ELSE 'unknown' END"
    return rank_sql, label_sql


def bucket_counts(
    value: str, bounds: tuple[tuple[float | None, str], ...], source: str, label: str, count: str
) -> str:
    """Counts per bucket of `value` over `source` (a FROM/WHERE clause), in bucket order."""
    rank_sql, label_sql = labelled_buckets(value, bounds)
    return (
        f"SELECT {label_sql} AS {label}, {count} FROM "
        f"(SELECT {rank_sql} AS bucket, COUNT(*) AS {count} {source} GROUP BY 1) buckets "
        "ORDER BY bucket"
    )


def percentiles(value: str, group: str | None, source: str) -> str:
    """Nearest-rank p50/p95 of `value` per `group`: portable window functions, no extensions."""
    partition = f"PARTITION BY {group} " if group else ""
    select_group = f"{group}, " if group else ""
    group_by = f" GROUP BY {group} ORDER BY {group}" if group else ""
    return (
        f"WITH ranked AS (SELECT {select_group}{value} AS value, "
        f"ROW_NUMBER() OVER ({partition}ORDER BY {value}) AS rn, "
        f"COUNT(*) OVER ({partition.strip()}) AS n {source}) "
        f"SELECT {select_group}MIN(CASE WHEN rn >= 0.5 * n THEN value END) AS p50, "
        f"MIN(CASE WHEN rn >= 0.95 * n THEN value END) AS p95, MAX(n) AS samples "
        f"FROM ranked{group_by}"
    )


def bucket_panel(
    title: str,
    value: str,
    bounds: tuple[tuple[float | None, str], ...],
    source: str,
    label: str,
    count: str,
    description: str = "",
) -> Panel:
    """A bar chart of `bucket_counts`, buckets on the x axis."""
    return Panel(
        title,
        "barchart",
        (Query(bucket_counts(value, bounds, source, label, count), table=True, time_columns=()),),
        width=8,
        options={"xField": label},
        description=description,
    )
