"""A confounded fleet through the real HTTP API on both databases (issue 16): the mixture, the
program's population, case-control after a one-off inventory load, and what the refresh stores."""

from __future__ import annotations

import secrets
from dataclasses import replace

import psycopg
import pytest
import requests
from sqlalchemy import select, text
from sqlalchemy.engine import make_url

from registry.config import Settings
from registry.demo.feed import feed
from registry.demo.simulator import (
    POOL_SHARED,
    SERVICE_LABEL,
    confounded,
    one_off_inventory,
    simulate,
)
from registry.epidemiology.models import EpidemiologyFinding, EpidemiologyVerdict
from registry.epidemiology.service import refresh
from sync.grafana.role import ensure_readonly_role
from tests.support.http import auth
from tests.support.roles import drop_role
from tests.support.simulated import SimulatedRegistry, signature_of

SIM = simulate(confounded(5, 0.3, physical_per_cluster=20))


@pytest.fixture
def settings(db_url: str, request: pytest.FixtureRequest) -> Settings:
    label = getattr(request, "param", None)
    return Settings(database_url=db_url, public_url="http://crashreg.test", epidemiology_program_label=label)


def _reader(live_server: str, token: str):  # type: ignore[no-untyped-def]
    http = requests.Session()
    http.headers.update(auth(token))

    def epidemiology(sim, answers, population: str) -> dict:  # type: ignore[no-untyped-def]
        sid = signature_of(sim, answers, population)
        response = http.get(f"{live_server}/api/v1/signatures/{sid}/epidemiology")
        assert response.status_code == 200
        return response.json()

    return epidemiology


def _cited(body: dict) -> set[tuple[str, str]]:
    return {
        (f["attribute"], f["value"]) for view in [body, *body["views"].values()] for f in view["findings"]
    }


@pytest.mark.parametrize("settings", [SERVICE_LABEL[0]], indirect=True)
def test_a_mixed_userspace_signature_through_the_api(live_server, make_token, database) -> None:  # type: ignore[no-untyped-def]
    answers = feed(SIM, live_server, make_token("admin", kind="agent"))
    epidemiology = _reader(live_server, make_token("read"))
    pure = SimulatedRegistry(SIM, program_label=SERVICE_LABEL[0])

    mixed = epidemiology(SIM, answers, "pool-mixed")
    assert mixed["signature"]["kind"] == "userspace"
    assert mixed["population"] == {
        "kind": "program",
        "program": "ingest-worker",
        "hosts": len(SIM.pool()),
        "source": "the inventory label service=ingest-worker",
    }
    assert mixed["verdict"] == "software" and mixed["baseline"] == "fleet"
    concentrated, spread = mixed["components"]
    assert (concentrated["attribute"], concentrated["value"]) == ("physical_host", SIM.pool_bad_physical_host)
    expected = pure.analyse(SIM.population("pool-mixed").bug)
    assert concentrated["events"] == expected["components"][0]["events"]
    assert concentrated["hosts"] == expected["components"][0]["hosts"]
    assert concentrated["uptime"] == expected["components"][0]["uptime"]
    assert spread["events"] + concentrated["events"] == mixed["events"] and spread["verdict"] == "software"
    assert mixed["statements"][0].startswith("software: a mixture: physical host ")
    assert not _cited(mixed) & POOL_SHARED

    race = epidemiology(SIM, answers, "pool-race")
    assert race["verdict"] == "software" and race["components"] == []
    assert not _cited(race) & POOL_SHARED

    with database.session() as session:
        refresh(session, program_label=SERVICE_LABEL[0])
    with database.session() as session:
        sid = int(signature_of(SIM, answers, "pool-mixed"))
        stored = session.get_one(EpidemiologyVerdict, sid)
        assert (
            stored.verdict == "software"
            and stored.analysis["components"][0]["value"] == SIM.pool_bad_physical_host
        )
        rollout = int(signature_of(SIM, answers, "rollout-regression"))
        timing = session.scalars(
            select(EpidemiologyFinding.attribute).where(
                EpidemiologyFinding.signature_id == rollout, EpidemiologyFinding.baseline == "timing"
            )
        ).all()
        assert set(timing) == {"start_date", "uptime"}
        # Grafana's reporting views show the parts and the words
        parts = session.execute(
            text(
                "SELECT kind, attribute, value, events, signature_verdict FROM rpt_epidemiology_components "
                "WHERE signature_id = :sid ORDER BY rank"
            ),
            {"sid": sid},
        ).all()
        concentrated = stored.analysis["components"][0]
        assert [tuple(row) for row in parts] == [
            ("concentrated", "physical_host", SIM.pool_bad_physical_host, concentrated["events"], "software"),
            ("spread", None, None, stored.events - concentrated["events"], "software"),
        ]
        count, summary = session.execute(
            text("SELECT concentrated, summary FROM rpt_epidemiology_verdicts WHERE signature_id = :sid"),
            {"sid": sid},
        ).one()
        assert count == 1 and summary.splitlines() == stored.analysis["statements"]
    if database.engine.dialect.name == "postgresql":  # the read-only role reads the new view
        role = f"crashreg_grafana_{secrets.token_hex(4)}"
        url = make_url(database.engine.url.render_as_string(hide_password=False))
        role_url = url.set(drivername="postgresql", username=role, password=secrets.token_hex(12))
        try:
            report = ensure_readonly_role(database.engine, role_url.render_as_string(hide_password=False))
            assert report.ok and "rpt_epidemiology_components" in report.granted
            with psycopg.connect(role_url.render_as_string(hide_password=False), autocommit=True) as conn:
                rows = conn.execute("SELECT kind FROM rpt_epidemiology_components ORDER BY rank").fetchall()
                assert ("concentrated",) in rows
        finally:
            drop_role(database.engine.url.render_as_string(hide_password=False), role)


def test_one_off_inventory_load_compares_changing_values_with_other_crashes(  # type: ignore[no-untyped-def]
    live_server, make_token
) -> None:
    sim = replace(SIM, inventory=one_off_inventory(SIM))  # loaded once, after every crash
    answers = feed(sim, live_server, make_token("admin", kind="agent"))
    epidemiology = _reader(live_server, make_token("read"))
    pure = SimulatedRegistry(SIM, sim.inventory)

    long_uptime = epidemiology(sim, answers, "long-uptime")
    assert long_uptime["verdict"] == "software" and long_uptime["baseline"] == "fleet+crashes"
    assert not {a for a, _ in _cited(long_uptime)} & {"kernel_version", "os_image"}
    assert any("no longer shows, with no history of the change" in s for s in long_uptime["statements"])
    assert [t["attribute"] for t in long_uptime["time_findings"]] == ["uptime"]

    rollout = epidemiology(sim, answers, "rollout-regression")
    top = rollout["findings"][0]
    assert (top["attribute"], top["value"], top["baseline"]) == (
        "kernel_version",
        "6.1.90-fleet.1",
        "crashes",
    )
    plain = pure.analyse(SIM.population("rollout-regression").bug)["findings"][0]
    assert top["in_signature"] == plain["in_signature"] and top["overall"] == pytest.approx(plain["overall"])

    mixed = epidemiology(sim, answers, "pool-mixed")
    assert mixed["population"]["source"] == "crash reports of the same program"
    assert mixed["components"][0]["value"] == SIM.pool_bad_physical_host
