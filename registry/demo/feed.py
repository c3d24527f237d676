"""Feed a simulated fleet to a registry through its real HTTP API (demo, tests, bench)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import requests

from .simulator import Simulation, inventory_json

INVENTORY_CHUNK = 2000
Progress = Callable[[int], None]


class FeedError(RuntimeError):
    pass


def _check(response: requests.Response, what: str) -> dict[str, Any]:
    if response.status_code not in (200, 201):
        raise FeedError(f"{what}: HTTP {response.status_code}: {response.text[:300]}")
    return response.json()


def post_inventory(http: requests.Session, base_url: str, sim: Simulation) -> int:
    """Every inventory snapshot, in time order, backdated with `observed_at`."""
    posted = 0
    for observed_at, hosts in sim.inventory:
        body = inventory_json(hosts)
        for start in range(0, len(body), INVENTORY_CHUNK):
            chunk = body[start : start + INVENTORY_CHUNK]
            _check(
                http.post(
                    f"{base_url}/api/v1/hosts",
                    json={"hosts": chunk, "observed_at": observed_at.isoformat()},
                    timeout=120,
                ),
                "POST /api/v1/hosts",
            )
            posted += len(chunk)
    return posted


def post_reports(
    base_url: str,
    token: str,
    reports: list[dict[str, Any]],
    progress: Progress | None = None,
    workers: int = 4,
) -> dict[str, dict[str, Any]]:
    """POST every report; returns report_id -> the registry's answer. Replays are fine
    (idempotent: the first answer comes back)."""
    local = threading.local()
    sessions: list[requests.Session] = []

    def send(report: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        http = getattr(local, "http", None)
        if http is None:
            http = local.http = requests.Session()
            http.headers["Authorization"] = f"Bearer {token}"
            sessions.append(http)
        answer = _check(
            http.post(f"{base_url}/api/v1/reports", json=report, timeout=120),
            f"POST /api/v1/reports {report['report_id']}",
        )
        return report["report_id"], answer

    answers: dict[str, dict[str, Any]] = {}
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for report_id, answer in pool.map(send, reports):
            answers[report_id] = answer
            if progress:
                progress(1)
    for http in sessions:
        http.close()
    return answers


# A core handler's capture per decision (agents/README.md: `full` writes the whole core,
# `filtered` the bounded one; `skip` writes none).
CORE_CAPTURES = {"full": "core", "filtered": "core_filtered"}


def post_core_captures(http: requests.Session, base_url: str, reports: list[dict[str, Any]],
                       answers: dict[str, dict[str, Any]]) -> int:
    """What the core handler records after writing a core it was told to keep: the capture,
    completed, at the path it wrote (the demo's cores stay on their simulated hosts)."""
    posted = 0
    for report in reports:
        answer = answers[report["report_id"]]
        method = CORE_CAPTURES.get(answer["capture"]["action"])
        if report["source"] != "userspace" or method is None:
            continue
        _check(http.post(f"{base_url}/api/v1/events/{answer['event_id']}/captures", json={
            "method": method, "status": "completed", "capture_key": f"{report['report_id']}-{method}",
            "target": f"/var/lib/crashreg/cores/{report['report_id']}.{method}"}, timeout=120),
            "POST /api/v1/events/{id}/captures")
        posted += 1
    return posted


def feed(
    sim: Simulation, base_url: str, token: str, progress: Progress | None = None
) -> dict[str, dict[str, Any]]:
    """Inventory first (the denominators), then the crashes in time order, then the cores the
    program's crashes kept."""
    with requests.Session() as http:
        http.headers["Authorization"] = f"Bearer {token}"
        post_inventory(http, base_url, sim)
        answers = post_reports(base_url, token, sim.reports, progress)
        post_core_captures(http, base_url, sim.reports, answers)
    return answers
