"""The pages an engineer triages from, through the real app on SQLite and PostgreSQL: the event
page (console log around the oops, stack with the guilty frame, host, capture), the signature
page (events over time with marks, the verdict in words, host counts, links out) and the list
(first seen, hosts, 30-day trend, verdict, Jira)."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from flask import render_template
from sqlalchemy import update

from registry.app import create_app
from registry.config import GrafanaSettings, Settings
from registry.core.jira_links import JiraLink
from registry.core.signatures import Signature
from registry.db import utcnow
from registry.epidemiology.service import refresh
from testkit.pages import login
from testkit.reports import NULL_DEREF_LOG, crash_report
from tests.support.http import auth

NOISE = "".join(f"[ 8811.{i:06d}] eth0: link up, 100 Gbps\n" for i in range(30))
LOG = NOISE + NULL_DEREF_LOG.replace(
    "[ 8812.118910]  mlx5e_napi_poll",
    "[ 8812.118907]  ? __die+0x20/0x70\n[ 8812.118910]  mlx5e_napi_poll",
)
GRAFANA = "https://grafana.example"


def at(days_ago: float) -> str:
    return (utcnow() - timedelta(days=days_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def report(client: Any, token: str, **fields: Any) -> dict[str, Any]:
    body = crash_report(console_log=LOG)
    host = body["host"] | fields.pop("host", {})
    body.update(fields, host=host)
    response = client.post("/api/v1/reports", json=body, headers=auth(token))
    assert response.status_code == 201, response.json
    return response.json


@pytest.fixture
def grafana_client(settings: Settings, database):  # type: ignore[no-untyped-def]
    """The app with Grafana configured, so the signature page links to its dashboard."""
    app = create_app(
        Settings(
            database_url=settings.database_url,
            public_url=settings.public_url,
            grafana=GrafanaSettings(url=GRAFANA),
        ),
        database,
    )
    app.config["TESTING"] = True
    return app.test_client()


def html_of(client: Any, path: str) -> str:
    response = client.get(path)
    assert response.status_code == 200, response.get_data(as_text=True)[:500]
    return response.get_data(as_text=True)


def test_event_page_shows_the_crash_itself(client, make_token) -> None:
    token = make_token("report")
    answer = report(client, token, host={"hostname": "gpu-e1", "kernel_version": "6.8.0-52"})
    event_id = answer["event_id"]
    login(client, make_token("read"), f"/events/{event_id}")
    html = html_of(client, f"/events/{event_id}")

    header = re.search(r'<span id="L(\d+)" class="ln header">.*?BUG: kernel NULL pointer dereference', html)
    assert header and int(header.group(1)) == 31  # after the 30 lines of noise
    guilty = re.search(r'<span id="L(\d+)" class="ln guilty">[^\n]*RIP: 0010:mlx5e_poll_rx_cq', html)
    assert guilty and int(guilty.group(1)) > int(header.group(1))
    assert 'id="L1"' not in html  # the excerpt starts a few lines before the oops
    assert re.search(r'class="ln unreliable">[^\n]*\? __die', html)
    stack = re.search(r'<ol class="stack">(.*?)</ol>', html, re.S)
    assert stack is not None
    items = re.findall(r"<li class=\"([a-z]*)\"><code>([^<]*)</code>", stack.group(1))
    assert items[0] == ("guilty", "mlx5e_poll_rx_cq")
    assert ("unreliable", "? __die") in items and ("", "mlx5e_napi_poll") in items
    assert answer["capture"]["reason"] in html and 'class="action action-full"' in html
    # The fingerprint's explanation, stored with the event, under the stack (pages/_explanation.html).
    assert '<div class="explanation">' in html and re.search(
        r'<tr class="frame-guilty">.*?mlx5e_poll_rx_cq', html, re.S
    )
    for fact in ("gpu-e1", "phys-17", "us-east", "6.8.0-52", "pool=train", "1.0 days", "crash_kernel"):
        assert fact in html
    assert f'href="/signatures/{answer["signature"]["id"]}"' in html

    whole = client.get(f"/events/{event_id}/console.txt")
    assert whole.status_code == 200 and whole.mimetype == "text/plain" and whole.get_data(as_text=True) == LOG
    missing = client.get("/events/987654")
    assert missing.status_code == 404 and "no event 987654" in missing.get_data(as_text=True)


def test_event_page_says_when_a_captured_file_was_removed(client, make_token) -> None:
    token = make_token("report")
    event_id = report(client, token)["event_id"]
    capture = {"method": "core", "status": "completed", "target": "/var/crash/c1.core", "capture_key": "k"}
    recorded = client.post(f"/api/v1/events/{event_id}/captures", json=capture, headers=auth(token))
    assert recorded.status_code == 201
    notice = {"capture_keys": ["k"], "reason": "deleted by the core handler's directory cap"}
    assert client.post("/api/v1/captures/removed", json=notice, headers=auth(token)).status_code == 200
    login(client, make_token("read"))
    row = html_of(client, f"/events/{event_id}").split('id="captures"')[1].split("</table>")[0]
    assert "completed" in row and "/var/crash/c1.core" in row
    removed = r'title="deleted by the core handler&#39;s directory cap">, file removed \d{4}-\d{2}-\d{2}'
    assert re.search(removed, row), row


def test_event_without_a_console_log_says_so(client, make_token) -> None:
    body = crash_report(
        console_log=None,
        stack={
            "signal": "SIGSEGV",
            "executable": "/usr/bin/trainer",
            "frames": [{"function": "step"}, {"function": "main"}],
        },
    )
    body.pop("console_log")
    answer = client.post("/api/v1/reports", json=body, headers=auth(make_token("report"))).json
    login(client, make_token("read"))
    html = html_of(client, f"/events/{answer['event_id']}")
    assert "No console log was stored" in html
    assert client.get(f"/events/{answer['event_id']}/console.txt").status_code == 404


def test_signature_page_triages(grafana_client, database, make_token) -> None:
    client, token = grafana_client, make_token("report")
    admin = make_token("admin")
    # The fleet, then a kernel rollout recorded by the inventory a day before the bug starts.
    hosts = [
        {"hostname": f"vm-{i:02d}", "physical_host": f"hv-{i % 3}", "kernel_version": "6.8.0-52"}
        for i in range(24)
    ]
    assert (
        client.post(
            "/api/v1/hosts", json={"hosts": hosts, "observed_at": at(40)}, headers=auth(admin)
        ).status_code
        == 200
    )
    rolled = [h | {"kernel_version": "6.8.0-60"} for h in hosts]
    assert (
        client.post(
            "/api/v1/hosts", json={"hosts": rolled, "observed_at": at(21)}, headers=auth(admin)
        ).status_code
        == 200
    )
    first = report(
        client,
        token,
        crashed_at=at(20),
        host={"hostname": "vm-00", "physical_host": "hv-0", "kernel_version": "6.8.0-60"},
    )
    sid = first["signature"]["id"]
    for i in range(1, 24):
        report(
            client,
            token,
            crashed_at=at(20 - i * 0.8),
            host={"hostname": f"vm-{i:02d}", "physical_host": f"hv-{i % 3}", "kernel_version": "6.8.0-60"},
        )
    late = report(client, token, crashed_at=at(30), host={"hostname": "vm-05", "physical_host": "hv-2"})
    # Resolved as fixed in 6.8.0-60, then a crash on that kernel: a regression.
    with database.session() as session:
        session.execute(
            update(Signature)
            .where(Signature.id == int(sid))
            .values(status="resolved", resolved_at=utcnow() - timedelta(days=3), fixed_in_kernel="6.8.0-60")
        )
        session.add(
            JiraLink(signature_id=int(sid), issue_key="CRASH-9", url="https://jira.example/browse/CRASH-9")
        )
    regressed = report(
        client,
        token,
        crashed_at=at(1),
        host={"hostname": "vm-07", "physical_host": "hv-1", "kernel_version": "6.8.0-60"},
    )

    login(client, make_token("read"))
    html = html_of(client, f"/signatures/{sid}")
    marks = re.findall(r'<li><span class="key key-([a-z-]+)"', html)
    assert {"first-seen", "kernel-rollout", "regression"} <= set(marks)
    assert "kernel 6.8.0-60 rolled out" in html
    assert (
        html.count('<rect class="bar"') >= 20
        and 'role="img" aria-labelledby="chart-title chart-desc"' in html
    )
    assert re.search(r'id="chart-desc">26 events between ', html)
    assert f'<dd id="first-seen">{at(30)[:10]}' in html  # the late report moved the first sighting

    assert re.search(r'id="verdict">[a-z-]+</span>', html)
    assert re.search(r'<ul class="statements" id="statements">\s*<li>', html)
    population = re.search(r'<p id="verdict-population">(.*?)</p>', html, re.S)
    assert population and "26 events on 3 physical hosts" in population.group(1)
    assert "(24 hosts when each VM counts apart)" in population.group(1)
    assert "the 20 with most events, of 24 hosts on 3 physical hosts" in html
    assert "Hosts (" not in html

    latest = re.findall(r'<a href="/events/(\d+)">', html.split('id="events"')[1].split("</section>")[0])
    assert latest[0] == regressed["event_id"] and latest[-1] == late["event_id"]  # by crash time
    assert 'id="jira-link" href="https://jira.example/browse/CRASH-9"' in html
    assert f'id="grafana-link" href="{GRAFANA}/d/crashreg-signature?var-signature={sid}"' in html
    assert f"crashreg triage-bundle {sid} --out triage-{sid}" in html


def test_signature_page_without_grafana_says_how_to_link_it(client, make_token) -> None:
    sid = report(client, make_token("report"))["signature"]["id"]
    login(client, make_token("read"))
    html = html_of(client, f"/signatures/{sid}")
    assert "not configured (CRASHREG_GRAFANA_URL)" in html and 'id="grafana-link"' not in html


def test_signature_list_shows_first_seen_hosts_trend_verdict_and_jira(client, database, make_token) -> None:
    token = make_token("report")
    answer = {}
    for i, days_ago in enumerate([45, 9, 2, 2, 0.2]):
        answer = report(
            client,
            token,
            crashed_at=at(days_ago),
            host={"hostname": f"gpu-{i}", "physical_host": f"phys-{i % 2}"},
        )
    sid = answer["signature"]["id"]
    with database.session() as session:
        session.add(
            JiraLink(signature_id=int(sid), issue_key="CRASH-3", url="https://jira.example/browse/CRASH-3")
        )
    login(client, make_token("read"))
    before = html_of(client, "/signatures")
    assert ">not yet</span>" in before  # no refresh has stored a verdict: hosts are counted now
    assert '<td class="num" title="now">2</td>' in before
    with database.session() as session:
        refresh(session)
    html = html_of(client, "/signatures")
    row = re.search(rf'<tr>\s*<td><a class="sig" href="/signatures/{sid}">.*?</tr>', html, re.S)
    assert row is not None
    cells = row.group(0)
    assert f'<time datetime="{at(45)[:10]}' in cells  # first seen
    assert '<td class="num" title="at the last epidemiology refresh">2</td>' in cells
    assert 'aria-label="4 events in the last 30 days, at most 2 a day"' in cells
    assert re.search(r'class="verdict verdict-[a-z-]+" title="[^"]+">[a-z-]+</span>', cells)
    assert 'href="https://jira.example/browse/CRASH-3">CRASH-3</a>' in cells


def test_the_grafana_link_names_the_provisioned_dashboard() -> None:
    from dashboards.signature import UID
    from registry.pages.views import GRAFANA_SIGNATURE_DASHBOARD

    assert GRAFANA_SIGNATURE_DASHBOARD == UID


def test_verdict_shows_the_parts_of_a_mixed_signature(app) -> None:  # type: ignore[no-untyped-def]
    """The epidemiology analysis may split a signature (a concentrated part and a spread rest):
    each part is shown with its own sentence, above the findings."""
    body = {
        "verdict": "software",
        "events": 40,
        "hosts": 12,
        "baseline": "fleet",
        "findings": [],
        "components": [
            {
                "kind": "concentrated",
                "events": 30,
                "statement": "physical host hv-9 carries 30 of the 40 crashes",
            },
            {
                "kind": "spread",
                "events": 10,
                "statement": "the other 10 crashes on 11 physical hosts: spread",
            },
        ],
    }
    with app.test_request_context():
        html = render_template(
            "pages/_verdict.html",
            epidemiology=body,
            statements=["software: spread"],
            components=body["components"],
            hostnames=15,
        )
    parts = re.findall(r"<li><b>([a-z]+)</b> \((\d+) events\): ([^<]+)</li>", html)
    assert parts == [
        ("concentrated", "30", "physical host hv-9 carries 30 of the 40 crashes"),
        ("spread", "10", "the other 10 crashes on 11 physical hosts: spread"),
    ]
    assert html.index('id="statements"') < html.index('id="components"')
    assert (
        "40 events on 12 physical hosts, the count the verdict weighs (15 hosts when each VM counts apart)"
        in html
    )
