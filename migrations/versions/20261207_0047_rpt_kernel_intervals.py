"""rpt_kernel_intervals: which kernel each host ran, and when (the denominators of per-kernel rates)

One row per host and stretch of time it ran one kernel version: `hostname`, `kernel_version`,
`valid_from`, `valid_to` (NULL: still running it). Grafana's "crash rate by kernel version"
overlaps these with its time range to get host-days per kernel; `rpt_kernel_fleet` (hosts per
kernel *now*) reversed that rate during a rollout.

Built as the epidemiology's fleet (registry/epidemiology/fleet.py) builds a host's value
intervals: each recorded `kernel_version` change closes the old value's interval (from the
previous change, or from when the host came), the current value runs from the last change;
a host with no change ran its current kernel all along. A host counts as `rpt_fleet_daily`
counts it: from its first sighting or, for back-filled history, from the UTC day of its
first crash when that day is earlier (the fleet rollup's marks, `rollup_host_days`, which
keep the crash days of archived events), until it is retired; every host, in the inventory
or known from its crashes only, as the crash counts include them all. No kernel recorded
(before a host's first known kernel, or a host that never had one): no row.

A plain view: a panel's read costs one pass over the hosts and the kernel changes
(docs/grafana.md gives the cost measured on bench/history.py's registries).

Revision ID: 0047_rpt_kernel_intervals
Revises: 0046_self_merged_signatures
Create Date: 2026-12-07 19:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0047_rpt_kernel_intervals"
down_revision: str | Sequence[str] | None = "0046_self_merged_signatures"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# A timestamp's UTC day as rollup_host_days keeps it, and such a day's midnight as a timestamp
# comparable with the hosts' (SQLite: the text SQLAlchemy writes, 'YYYY-MM-DD HH:MM:SS.ffffff').
DAY = {"postgresql": "(h.first_seen AT TIME ZONE 'UTC')::date", "sqlite": "date(h.first_seen)"}
MIDNIGHT = {"postgresql": "(({})::timestamp AT TIME ZONE 'UTC')", "sqlite": "(({}) || ' 00:00:00.000000')"}
FIRST_DAY = "SELECT MIN(d.day) FROM rollup_host_days d WHERE d.host_id = h.id"

VIEW = """
    WITH born AS (
        SELECT h.id, h.hostname, h.kernel_version, h.retired_at,
               CASE WHEN EXISTS (SELECT 1 FROM rollup_host_days d WHERE d.host_id = h.id AND d.day < {day})
                    THEN {midnight} ELSE h.first_seen END AS born
        FROM hosts h
    ), changes AS (
        SELECT host_id, old_value, changed_at,
               LAG(changed_at) OVER host AS since, LEAD(id) OVER host AS next_id
        FROM host_attribute_changes WHERE attribute = 'kernel_version'
        WINDOW host AS (PARTITION BY host_id ORDER BY changed_at, id)
    ), spans AS (
        SELECT b.hostname, c.old_value AS kernel_version, b.born, b.retired_at,
               COALESCE(c.since, b.born) AS since, c.changed_at AS until
        FROM changes c JOIN born b ON b.id = c.host_id
        WHERE c.old_value IS NOT NULL
        UNION ALL
        SELECT b.hostname, b.kernel_version, b.born, b.retired_at, COALESCE(c.changed_at, b.born), NULL
        FROM born b LEFT JOIN changes c ON c.host_id = b.id AND c.next_id IS NULL
        WHERE b.kernel_version IS NOT NULL
    ), clipped AS (
        SELECT hostname, kernel_version,
               CASE WHEN since > born THEN since ELSE born END AS valid_from,
               CASE WHEN until IS NULL THEN retired_at
                    WHEN retired_at IS NULL OR until < retired_at THEN until
                    ELSE retired_at END AS valid_to
        FROM spans
    )
    SELECT hostname, kernel_version, valid_from, valid_to FROM clipped
    WHERE valid_to IS NULL OR valid_to > valid_from
"""


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    op.execute(f"CREATE VIEW rpt_kernel_intervals AS {VIEW.format(day=DAY[dialect], midnight=MIDNIGHT[dialect].format(FIRST_DAY))}")


def downgrade() -> None:
    op.execute("DROP VIEW rpt_kernel_intervals")
