"""A registry database, an emulated Jira and the sync between them, on one hand-moved clock."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import jira
from sqlalchemy import select

from registry.config import Settings
from registry.core.events import Event
from registry.core.hosts import Host
from registry.core.jira_links import JiraLink
from registry.core.signatures import Signature
from registry.db import Database
from registry.ingest.schemas import ReportSchema
from registry.ingest.service import ingest_report
from registry.signatures.service import count_event
from sync.jira.config import JiraOptions
from sync.jira.run import SyncReport, sync_once
from tests.emulators.fixtures import ManualClock
from tests.emulators.jira import JiraEmulator

CONSOLE_LOG = """\
[ 8812.118803] BUG: KASAN: use-after-free in {function}+0x3a/0x9c0
[ 8812.118810] #PF: supervisor read access in kernel mode
[ 8812.118815] Oops: 0000 [#1] SMP NOPTI
[ 8812.118820] CPU: 17 PID: 0 Comm: swapper/17 Tainted: G           OE     {kernel} #53-Ubuntu
[ 8812.118830] RIP: 0010:{function}+0x3a/0x9c0 [mlx5_core]
[ 8812.118900] Call Trace:
[ 8812.118910]  {function}+0xde/0x6b0 [mlx5_core]
[ 8812.118915]  __napi_poll+0x30/0x1f0
[ 8812.118920]  net_rx_action+0x181/0x2e0
[ 8812.118930] Kernel panic - not syncing: Fatal exception in interrupt ({function})
"""

WEBHOOK_SECRET = "whsec-test-3f1c"  # the registry's and the emulated Jira's shared secret


def function_name(n: int) -> str:
    """Distinct guilty functions without digits (fingerprints ignore numbers)."""
    return "fn_" + "".join(chr(97 + (n // 26**i) % 26) for i in range(3))


def jira_options(emulator: JiraEmulator, **overrides: Any) -> JiraOptions:
    """How an operator would configure each flavour: PAT on Data Center, e-mail + token on Cloud."""
    auth = ({"user": "crashbot@example.com", "token": "bot-api-token"} if emulator.cloud
            else {"user": None, "token": "bot-pat"})
    values: dict[str, Any] = {"url": emulator.url, "project": "CRASH",
                              "public_url": "http://crashreg.test", **auth}
    return JiraOptions(**(values | overrides))


@dataclass
class Harness:
    database: Database
    settings: Settings
    emulator: JiraEmulator
    clock: ManualClock
    options: JiraOptions
    reports: list[dict[str, Any]] = field(default_factory=list)

    def crash(self, function: str = "mlx5e_poll_rx_cq", host: str = "gpu-a017",
              kernel: str = "6.8.0-52-generic", at: datetime | None = None,
              region: str = "us-east", sku: str = "h100x8") -> dict[str, Any]:
        """A crash report through the registry's own ingest."""
        raw = self._raw(function, host, kernel, at or self.clock(), region, sku)
        return ingest_report(self.database, self.settings, ReportSchema().load(raw), raw).answer

    @staticmethod
    def _raw(function: str, host: str, kernel: str, at: datetime, region: str,
             sku: str) -> dict[str, Any]:
        return {
            "report_id": f"r-{uuid.uuid4().hex}", "source": "crash_kernel",
            "crashed_at": at.isoformat(), "boot_id": uuid.uuid4().hex,
            "host": {"hostname": host, "kernel_version": kernel, "region": region, "sku": sku},
            "console_log": CONSOLE_LOG.format(kernel=kernel, function=function),
        }

    def burst(self, signature_id: int, count: int, kernel: str, host_prefix: str) -> None:
        """`count` more crashes of a known signature from as many hosts, written in bulk.

        The storm test is about what the sync does with a storm, not about ingest speed
        (bench/ measures that); the rows are what ingest writes, and the counters go
        through the registry's own count_event.
        """
        now = self.clock()
        with self.database.session() as session:
            signature = session.get_one(Signature, signature_id)
            hosts = [Host(hostname=f"{host_prefix}-{n:04d}", kernel_version=kernel,
                          region="us-east", sku="h100x8") for n in range(count)]
            session.add_all(hosts)
            session.flush()
            events = [Event(host_id=h.id, hostname=h.hostname, boot_key=uuid.uuid4().hex,
                            crashed_at=now, first_source="crash_kernel", sources=["crash_kernel"],
                            capture_action="skip", capture_reason="storm",
                            signature_id=signature.id, fingerprint=signature.fingerprint,
                            kernel_version=kernel, region="us-east", sku="h100x8")
                      for h in hosts]
            session.add_all(events)
            session.flush()
            for event in events:
                count_event(session, signature.id, event.id, now)

    def sync(self, **kwargs: Any) -> SyncReport:
        return sync_once(self.database, self.options, self.clock, **kwargs)

    def link(self, signature_id: str | int) -> JiraLink | None:
        with self.database.session() as session:
            return session.get(JiraLink, int(signature_id))

    def signature(self, signature_id: str | int) -> Signature:
        with self.database.session() as session:
            return session.get_one(Signature, int(signature_id))

    def links(self) -> list[JiraLink]:
        with self.database.session() as session:
            return list(session.scalars(select(JiraLink)))

    def jira(self) -> jira.JIRA:
        if self.emulator.cloud:
            return jira.JIRA(self.emulator.url, basic_auth=("alice", "alice-pw"), max_retries=0)
        return jira.JIRA(self.emulator.url, token_auth="alice-pat", max_retries=0)

    def later(self, **delta: float) -> datetime:
        return self.clock.advance(**delta)


def advance_and_sync(harness: Harness, minutes: int, every: timedelta) -> list[SyncReport]:
    reports = []
    steps = int(timedelta(minutes=minutes) / every)
    for _ in range(steps):
        harness.clock.advance(seconds=every.total_seconds())
        reports.append(harness.sync())
    return reports
