"""Crash lab fixtures: the unpacked kit, the test module, registries, images and crashed hosts.

The lab runs in `make test` like every other folder (pytest collects tests/lab); a missing
prerequisite fails the session with LabError, it never skips. Every guest's serial console and
every timing goes under $CRASHREG_LAB_OUT (default: the session's tmp dir) for inspection;
`lab-timings.jsonl` there gets one line per guest boot (appended, so xdist workers share it):
the figures docs/crash-lab.md quotes (`python -m tests.lab.timings FILE` tabulates them).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
import requests

from agents import build_reporter
from tests.lab import lab
from tests.lab.packages import Kit
from tests.lab.packages import kit as load_kit
from tests.support.databases import create_postgres_database, drop_postgres_database


@pytest.fixture(scope="session")
def lab_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = (
        Path(os.environ["CRASHREG_LAB_OUT"])
        if os.environ.get("CRASHREG_LAB_OUT")
        else tmp_path_factory.mktemp("crash-lab")
    )
    out.mkdir(parents=True, exist_ok=True)
    return out


@pytest.fixture(scope="session")
def installed(lab_out: Path) -> Path:
    """/usr/lib/crashreg as agents/README.md installs it: the pyz `make reporter` builds (the
    post-boot agent, and the DPU agent as its `dpu` command, run from here)."""
    root = lab_out / "usr-lib-crashreg"
    root.mkdir(parents=True, exist_ok=True)
    build_reporter.build(root / "crashreg-report.pyz")
    return root


@pytest.fixture(scope="session")
def kit() -> Kit:
    return load_kit()


@pytest.fixture(scope="session")
def module(kit: Kit) -> Path:
    return lab.build_module(kit)


@dataclass
class Host:
    """One lab host: its disk (its /var) survives its boots, like a real machine's."""

    name: str
    disk: lab.Disk
    boots: list[lab.Boot] = field(default_factory=list)


@dataclass
class Lab:
    """A registry under test and the images that point a crash kernel at it."""

    kit: Kit
    module: Path
    registry: lab.Registry
    out: Path
    images: dict[str, Path] = field(default_factory=dict)

    def image(self, name: str, url: str | None = None, bundle: str | None = None) -> Path:
        """The first kernel's initramfs (holding the crash kernel's) for a reporter.conf."""
        if name not in self.images:
            conf = lab.reporter_conf(url or self.registry.guest_url)
            crash = lab.crash_initramfs(
                self.kit, self.out / f"{name}-crash.img", conf, self.registry.tokens["report"], bundle
            )
            self.images[name] = lab.first_initramfs(
                self.kit, self.out / f"{name}-first.img", crash, self.module
            )
        return self.images[name]

    def host(self, name: str) -> Host:
        return Host(name, lab.Disk.create(self.out / f"{name}.disk"))

    def crash(self, host: Host, kind: str, image: str = "online") -> lab.Boot:
        booted = lab.boot(
            self.kit,
            self.image(image),
            host.disk,
            kind,
            host.name,
            self.out / f"{host.name}-{len(host.boots) + 1}-{kind}.console.log",
        )
        assert booted.returncode == 0 and "LAB: done" in booted.console, booted.console[-4000:]
        host.boots.append(booted)
        row = {"host": host.name, "kind": kind, "image": image} | booted.timings()
        with (self.out.parent / "lab-timings.jsonl").open("a") as timings:
            timings.write(json.dumps(row) + "\n")
        return booted

    def stored_report(self, report_id: str) -> dict[str, Any]:
        """The report row as the registry stored it (console log and payload included)."""
        columns = ("report_id", "source", "event_id", "console_log", "payload")
        with psycopg.connect(self.registry.database_url) as conn:
            row = conn.execute(
                f"SELECT {', '.join(columns)} FROM reports WHERE report_id = %s", (report_id,)
            ).fetchone()
        assert row is not None, f"the registry holds no report {report_id}"
        return dict(zip(columns, row, strict=True))

    def event_of(self, report_id: str) -> dict[str, Any]:
        return self.registry.get(f"/api/v1/events/{self.stored_report(report_id)['event_id']}")

    def bundle_text(self) -> str:
        response = requests.get(
            self.registry.url + "/api/v1/policy-bundle",
            params={"format": "text"},
            headers={"Authorization": f"Bearer {self.registry.tokens['report']}"},
            timeout=30,
        )
        assert response.status_code == 200, response.text
        return response.text


@pytest.fixture(scope="module")
def make_lab(kit: Kit, module: Path, lab_out: Path) -> Iterator[Callable[..., Lab]]:
    """Labs over fresh PostgreSQL databases, each with a gunicorn registry; stopped and dropped after."""
    made: list[tuple[lab.Registry, str]] = []

    def make(name: str, **env: str) -> Lab:
        url = create_postgres_database("crashreg_lab")
        out = lab_out / name
        out.mkdir(exist_ok=True)
        registry = lab.Registry(url, env=env)
        made.append((registry, url))
        registry.start(out / "gunicorn.log")
        return Lab(kit, module, registry, out)

    yield make
    for registry, url in made:
        registry.stop()
        drop_postgres_database(url)


def spooled_body(host: Host, report_id: str, folder: str = "sent") -> dict[str, Any]:
    """A report body the crash kernel kept on the host's disk."""
    path = f"/spool/crashreg/{folder + '/' if folder else ''}{report_id}.json"
    return json.loads(host.disk.read(path))

