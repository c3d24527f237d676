"""Provision Grafana through its HTTP API: folder, data source and dashboards, idempotently.

A second run changes nothing in Grafana: each object is compared with what Grafana holds
and only saved when it differs. A dashboard someone edited in Grafana since crashreg last
saved it (its version moved past the one recorded in `grafana_provisioned`) is reported
and kept, unless `force` is set.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from grafana_client import GrafanaApi
from grafana_client.client import GrafanaClientError

import registry
from dashboards import FOLDER_TITLE, FOLDER_UID
from dashboards.model import Dashboard
from registry.db import Database, utcnow
from registry.grafana.models import GrafanaProvisioned
from sync.grafana.datasource import DataSourceSpec

VOLATILE_KEYS = ("id", "version")


@dataclass(frozen=True)
class Outcome:
    kind: str
    uid: str
    action: str  # created | updated | unchanged | kept-edited | overwritten | conflict
    detail: str = ""

    def line(self) -> str:
        return f"{self.kind} {self.uid}: {self.action}" + (f" ({self.detail})" if self.detail else "")


@dataclass
class ProvisionReport:
    outcomes: list[Outcome] = field(default_factory=list)

    def add(self, outcome: Outcome) -> None:
        self.outcomes.append(outcome)

    def by_action(self, action: str) -> list[Outcome]:
        return [o for o in self.outcomes if o.action == action]

    @property
    def changed(self) -> bool:
        return any(o.action in ("created", "updated", "overwritten") for o in self.outcomes)


def content_hash(document: dict[str, Any]) -> str:
    stable = {k: v for k, v in document.items() if k not in VOLATILE_KEYS}
    return hashlib.sha256(json.dumps(stable, sort_keys=True).encode()).hexdigest()


def provisioning_message() -> str:
    return f"crashreg {registry.__version__}: provisioned by `crashreg grafana provision`"


def _is_missing(error: GrafanaClientError) -> bool:
    return error.status_code == 404


class Provisioner:
    def __init__(self, api: GrafanaApi, database: Database, force: bool = False) -> None:
        self.api = api
        self.database = database
        self.force = force

    # -- state ------------------------------------------------------------------------------

    def _state(self, kind: str, uid: str) -> GrafanaProvisioned | None:
        with self.database.session() as session:
            return session.get(GrafanaProvisioned, (kind, uid))

    def _remember(self, kind: str, uid: str, version: int | None, digest: str) -> None:
        with self.database.session() as session:
            row = session.get(GrafanaProvisioned, (kind, uid))
            if row is None:
                session.add(GrafanaProvisioned(kind=kind, uid=uid, version=version, content_sha256=digest))
            else:
                row.version, row.content_sha256, row.provisioned_at = version, digest, utcnow()

    # -- objects ----------------------------------------------------------------------------

    def folder(self) -> Outcome:
        try:
            current = self.api.folder.get_folder(FOLDER_UID)
        except GrafanaClientError as error:
            if not _is_missing(error):
                raise
            self.api.folder.create_folder(FOLDER_TITLE, uid=FOLDER_UID)
            return Outcome("folder", FOLDER_UID, "created")
        if current["title"] == FOLDER_TITLE:
            return Outcome("folder", FOLDER_UID, "unchanged")
        self.api.folder.update_folder(FOLDER_UID, title=FOLDER_TITLE, version=current["version"])
        return Outcome("folder", FOLDER_UID, "updated", f"title was {current['title']!r}")

    def datasource(self, spec: DataSourceSpec) -> Outcome:
        digest = content_hash(
            {**spec.body, "secret": hashlib.sha256((spec.secret or "").encode()).hexdigest()}
        )
        try:
            current = self.api.datasource.get_datasource_by_uid(spec.uid)
        except GrafanaClientError as error:
            if not _is_missing(error):
                raise
            self.api.datasource.create_datasource(spec.request())
            self._remember("datasource", spec.uid, None, digest)
            return Outcome("datasource", spec.uid, "created")
        differs = [
            key
            for key, wanted in spec.body.items()
            if (
                {k: current.get(key, {}).get(k) for k in wanted} != wanted
                if isinstance(wanted, dict)
                else current.get(key) != wanted
            )
        ]
        if spec.secret is not None and not current.get("secureJsonFields", {}).get("password"):
            differs.append("password")
        state = self._state("datasource", spec.uid)
        if state is not None and state.content_sha256 != digest and "password" not in differs:
            differs.append("password")
        if not differs:
            if state is None:
                self._remember("datasource", spec.uid, None, digest)
            return Outcome("datasource", spec.uid, "unchanged")
        self.api.datasource.update_datasource_by_uid(
            spec.uid, {**spec.request(), "version": current.get("version")}
        )
        self._remember("datasource", spec.uid, None, digest)
        return Outcome("datasource", spec.uid, "updated", ", ".join(differs))

    def dashboard(self, document: Dashboard) -> Outcome:
        uid = document["uid"]
        digest = content_hash(document)
        try:
            current = self.api.dashboard.get_dashboard(uid)
        except GrafanaClientError as error:
            if not _is_missing(error):
                raise
            return self._save(document, digest, version=None, action="created")
        meta, held = current["meta"], current["dashboard"]
        version = int(meta["version"])
        same = content_hash(held) == digest and meta.get("folderUid") == FOLDER_UID
        state = self._state("dashboard", uid)
        edited = state.version != version if state is not None else not same
        if edited and not self.force:
            since = f"version {state.version} -> {version}" if state else f"version {version}, not ours"
            return Outcome(
                "dashboard", uid, "kept-edited", f"edited in Grafana ({since}); --force overwrites"
            )
        if same:
            if state is None or state.version != version:
                self._remember("dashboard", uid, version, digest)
            return Outcome("dashboard", uid, "unchanged", f"version {version}")
        return self._save(document, digest, version=version, action="overwritten" if edited else "updated")

    def _save(self, document: Dashboard, digest: str, version: int | None, action: str) -> Outcome:
        body = {k: v for k, v in document.items() if k != "id"}
        if version is not None:
            body["version"] = version
        try:
            saved = self.api.dashboard.update_dashboard(
                {
                    "dashboard": body,
                    "folderUid": FOLDER_UID,
                    "overwrite": False,
                    "message": provisioning_message(),
                }
            )
        except GrafanaClientError as error:
            if error.status_code != 412:
                raise
            status = error.response.get("status") if isinstance(error.response, dict) else None
            return Outcome("dashboard", document["uid"], "conflict", f"{status}: {error.message}")
        self._remember("dashboard", document["uid"], int(saved["version"]), digest)
        return Outcome("dashboard", document["uid"], action, f"version {saved['version']}")

    def run(
        self,
        spec: DataSourceSpec,
        dashboards: Iterable[Dashboard],
        progress: Callable[[Outcome], None] | None = None,
    ) -> ProvisionReport:
        report = ProvisionReport()
        steps: list[Callable[[], Outcome]] = [self.folder, lambda: self.datasource(spec)]
        steps += [lambda d=d: self.dashboard(d) for d in dashboards]
        for step in steps:
            outcome = step()
            report.add(outcome)
            if progress:
                progress(outcome)
        return report


def connect(url: str, token: str, timeout: float = 10.0) -> GrafanaApi:
    """A client for a service-account token; fails early if Grafana is unreachable."""
    api = GrafanaApi.from_url(url, credential=token, timeout=timeout)
    api.connect()
    return api
