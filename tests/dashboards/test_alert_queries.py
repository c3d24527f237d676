"""Every alert rule's query, expanded as Grafana's data source backend expands it, runs through
Grafana's read-only door (the role on PostgreSQL, the reporting copy on SQLite) and is evaluated
as Grafana evaluates the rule: text columns are the instance's labels, the one number goes
through reduce (last) and the threshold; no rows is NoData, mapped by the rule's noDataState.
Each rule fires on the wave (evaluated three hours after it: the fleet has been silent since,
and the Jira sync has not drained its outbox) and stays quiet on a normal fleet evaluated now.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from dashboards import FOLDER_UID, build_dashboards
from dashboards.alerts import build_rule_group
from dashboards.dialects import DIALECTS
from registry.config import AlertThresholds
from registry.db import Database
from testkit.grafana_sql import TimeRange, expand_target
from tests.support.alert_fleets import WAVE_BIOS, WAVE_SKU, Wave, load_new_crashes, load_normal, load_wave
from tests.support.fleet import LoadedFleet
from tests.support.grafana import Runner, dialect_of

Instances = dict[tuple[tuple[str, str], ...], float]
COMPARE = {"gt": lambda value, limit: value > limit, "lt": lambda value, limit: value < limit}


def rules_for(db_url: str) -> dict[str, dict[str, Any]]:
    dialect = dialect_of(db_url)
    group = build_rule_group(
        DIALECTS[dialect],
        "https://crashreg.example",
        AlertThresholds(),
        True,
        build_dashboards(dialect, "https://crashreg.example"),
        FOLDER_UID,
    )
    return {rule["uid"].removeprefix("crashreg-"): rule for rule in group["rules"]}


def evaluate(rule: dict[str, Any], run: Runner, at: datetime) -> tuple[bool, Instances, Instances]:
    """At evaluation time `at`: is the rule alerting, its firing instances (labels -> value),
    and every instance's value, firing or not."""
    query, reduce, threshold = rule["data"]
    assert reduce["model"]["type"] == "reduce" and threshold["model"]["type"] == "threshold"
    span = query["relativeTimeRange"]
    time_range = TimeRange(at - timedelta(seconds=span["from"]), at - timedelta(seconds=span["to"]))
    columns, rows = run(expand_target(query["model"], {}, time_range))
    evaluator = threshold["model"]["conditions"][0]["evaluator"]
    values: Instances = {}
    for row in rows:
        labels = tuple(
            (name, value) for name, value in zip(columns, row, strict=True) if isinstance(value, str)
        )
        numbers = [v for v in row if isinstance(v, int | float | Decimal) and not isinstance(v, bool)]
        assert len(numbers) == 1 and len(labels) + 1 == len(row), f"{rule['uid']}: one number per row: {row}"
        values[labels] = float(numbers[0])
    firing = {k: v for k, v in values.items() if COMPARE[evaluator["type"]](v, evaluator["params"][0])}
    if not rows:
        return rule["noDataState"] == "Alerting", {}, {}
    return bool(firing), firing, values


@pytest.fixture
def now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


@pytest.fixture
def normal(client: Any, make_token: Callable[..., str], database: Database, now: datetime) -> LoadedFleet:
    return load_normal(client, make_token("report"), database, now)


@pytest.fixture
def wave(client: Any, make_token: Callable[..., str], database: Database, now: datetime) -> Wave:
    return load_wave(client, make_token("report"), make_token("triage"), database, now)


def test_every_rule_stays_quiet_on_a_normal_fleet(
    normal: LoadedFleet, read_only: Runner, db_url: str, now: datetime
) -> None:
    rules = rules_for(db_url)
    noisy = {key: evaluate(rule, read_only, now + timedelta(minutes=5))[:2] for key, rule in rules.items()}
    assert {key: found for key, (alerting, found) in noisy.items() if alerting} == {}
    # Quiet, not blind: the rollout kernel is compared (and crashes like the rest), reports
    # arrive, the outbox is young.
    at = now + timedelta(minutes=5)
    _, _, ratios = evaluate(rules["kernel-rollout-crash-rate"], read_only, at)
    assert [dict(labels)["kernel"] for labels in ratios] == ["6.1.90-fleet.1"]
    assert 0.3 < next(iter(ratios.values())) < 2
    for key in ("ingest-silence", "jira-sync-behind"):
        _, _, minutes = evaluate(rules[key], read_only, at)
        assert list(minutes) == [()] and 0 < minutes[()] < 15


def test_every_rule_fires_on_the_wave(wave: Wave, read_only: Runner, db_url: str, now: datetime) -> None:
    rules = rules_for(db_url)
    later = now + timedelta(hours=3)
    results = {key: evaluate(rule, read_only, later)[:2] for key, rule in rules.items()}
    assert {key for key, (alerting, _) in results.items() if not alerting} == set()

    def labels(key: str, name: str) -> set[str]:
        return {dict(instance)[name] for instance in results[key][1]}

    assert wave.novel_signature in labels("new-signature-spread", "signature")
    assert labels("signature-regression", "signature") == {wave.regressed_signature}
    assert labels("kernel-rollout-crash-rate", "kernel") == {wave.rollout_kernel}
    assert labels("bios-rollout-crash-rate", "bios") == {WAVE_BIOS}
    assert labels("sku-rollout-crash-rate", "sku") == {WAVE_SKU}
    assert labels("failed-captures", "method") == {"makedumpfile"}
    assert labels("warning-turned-panic", "signature") == {wave.warned_signature}
    [no_crash_share] = results["reports-without-crash"][1].values()  # 30 cut consoles in the wave
    assert 0.2 < no_crash_share < 1
    assert next(iter(results["ingest-silence"][1].values())) >= 179  # minutes since the last report
    assert next(iter(results["jira-sync-behind"][1].values())) >= 179

    # The same wave evaluated as it happens: silence and the Jira backlog are not (yet) alarms.
    during = {key: evaluate(rule, read_only, now + timedelta(minutes=5))[0] for key, rule in rules.items()}
    assert {key for key, alerting in during.items() if not alerting} == {"ingest-silence", "jira-sync-behind"}



@pytest.fixture(params=[(25, 1.0), (1, 0.04)], ids=["25-new-signatures", "one-new-bug"])
def new_crashes(
    request: pytest.FixtureRequest,
    client: Any,
    make_token: Callable[..., str],
    database: Database,
    now: datetime,
) -> tuple[int, float]:
    """25 crashes of so many new signatures, and the share of them that opened one."""
    signatures, share = request.param
    load_new_crashes(client, make_token("report"), database, now, signatures, crashes=25)
    return signatures, share


def test_dedup_collapse_counts_the_crashes_that_opened_a_signature(
    new_crashes: tuple[int, float], read_only: Runner, db_url: str, now: datetime
) -> None:
    """25 crashes opening 25 signatures is fingerprinting gone wrong; 25 crashes of one new
    bug is one new bug (one crash of the 25 opened a signature), not a collapse."""
    signatures, share = new_crashes
    alerting, _, values = evaluate(rules_for(db_url)["dedup-collapse"], read_only, now + timedelta(minutes=5))
    assert values == {(): pytest.approx(share)} and alerting == (signatures > 1)
