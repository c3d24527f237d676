"""Provision crashreg's alert rules into Grafana: its own rule group, idempotently, nothing else.

The group (`crashreg` in the crashreg folder) is written with one PUT of the provisioning API,
which replaces the whole group, so before writing: every rule Grafana holds is listed once, and
a rule in the group that crashreg never wrote, or one of crashreg's uids used by a rule in
another group, stops the run for that group ("conflict") instead of being deleted or moved.
A rule changed in Grafana since crashreg wrote it (its content differs from the digest recorded
in `grafana_provisioned`) is kept as Grafana holds it unless `force` is set. Nothing is written
when what Grafana holds is what crashreg would write. Contact points, notification policies and
templates are never read or written: routing stays the operator's.

Rules are written with provenance `api` (no X-Disable-Provenance header): Grafana shows them as
provisioned and locks them in its UI, since thresholds are crashreg settings.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from grafana_client import GrafanaApi
from grafana_client.client import GrafanaClientError
from sqlalchemy import delete, select

from dashboards.alert_model import REQUIRED_RULE_FIELDS, RuleGroup, group_problems
from registry.db import Database, utcnow
from registry.grafana.models import GrafanaProvisioned
from sync.grafana.provision import Outcome, content_hash

RULE_KIND = "alert-rule"
# What crashreg sets on a rule (orgID is Grafana's own), compared with what Grafana holds.
COMPARED_FIELDS = (
    *(name for name in REQUIRED_RULE_FIELDS if name != "orgID"),
    "annotations",
    "labels",
    "isPaused",
)
# Grafana's answers to a group PUT it refuses: reported, not raised (a 5xx still raises).
REFUSED_STATUSES = (400, 403, 409)


class AlertRulesInvalid(ValueError):
    """crashreg's own rules do not fit Grafana's alert-rule shape (e.g. a bad interval setting)."""


def checked(group: RuleGroup) -> RuleGroup:
    """The group, if Grafana would take it (its shape, its interval): before any write or file."""
    problems = group_problems(group)
    if problems:
        raise AlertRulesInvalid("; ".join(problems))
    return group


def comparable(rule: dict[str, Any]) -> dict[str, Any]:
    """The fields crashreg sets, as Grafana returns them (empty maps are left out there)."""
    return {
        name: (rule.get(name) or {}) if name in ("annotations", "labels") else rule.get(name)
        for name in COMPARED_FIELDS
    }


class AlertProvisioner:
    def __init__(self, api: GrafanaApi, database: Database, force: bool = False) -> None:
        self.api = api
        self.database = database
        self.force = force

    def _recorded(self) -> dict[str, str]:
        with self.database.session() as session:
            rows = session.scalars(select(GrafanaProvisioned).where(GrafanaProvisioned.kind == RULE_KIND))
            return {row.uid: row.content_sha256 for row in rows}

    def _record(self, written: dict[str, str], removed: list[str]) -> None:
        with self.database.session() as session:
            if removed:
                session.execute(
                    delete(GrafanaProvisioned).where(
                        GrafanaProvisioned.kind == RULE_KIND, GrafanaProvisioned.uid.in_(removed)
                    )
                )
            for uid, digest in written.items():
                row = session.get(GrafanaProvisioned, (RULE_KIND, uid))
                if row is None:
                    session.add(
                        GrafanaProvisioned(kind=RULE_KIND, uid=uid, version=None, content_sha256=digest)
                    )
                else:
                    row.content_sha256, row.provisioned_at = digest, utcnow()

    def _held_interval(self, folder: str, title: str) -> int | None:
        try:
            return int(self.api.alertingprovisioning.get_rule_group(folder, title)["interval"])
        except GrafanaClientError as error:
            if error.status_code != 404:
                raise
            return None

    def _blockers(
        self, everything: list[dict[str, Any]], group: RuleGroup, recorded: dict[str, str]
    ) -> list[str]:
        """Rules a group PUT would delete or move although crashreg did not write them."""
        wanted = {rule["uid"] for rule in group["rules"]}
        problems = []
        for rule in everything:
            ours_here = rule["folderUID"] == group["folderUid"] and rule["ruleGroup"] == group["title"]
            if ours_here and rule["uid"] not in wanted and rule["uid"] not in recorded:
                problems.append(
                    f"rule {rule['uid']} ({rule['title']!r}) is in the group but crashreg did not create it; "
                    "move it to another group"
                )
            elif not ours_here and rule["uid"] in wanted:
                problems.append(
                    f"uid {rule['uid']} is taken by {rule['title']!r} in folder {rule['folderUID']}, "
                    f"group {rule['ruleGroup']}"
                )
        return problems

    def run(self, group: RuleGroup, progress: Callable[[Outcome], None] | None = None) -> list[Outcome]:
        outcomes = self._plan_and_write(checked(group))
        for outcome in outcomes:
            if progress:
                progress(outcome)
        return outcomes

    def _plan_and_write(self, group: RuleGroup) -> list[Outcome]:
        folder, title = group["folderUid"], group["title"]
        try:
            everything = self.api.alertingprovisioning.get_alertrules_all()
        except GrafanaClientError as error:
            if error.status_code != 404:
                raise
            return [
                Outcome("alert-group", title, "conflict", "this Grafana has no alerting provisioning API")
            ]
        recorded = self._recorded()
        blockers = self._blockers(everything, group, recorded)
        if blockers:
            return [Outcome("alert-group", title, "conflict", "; ".join(blockers))]
        held = {r["uid"]: r for r in everything if r["folderUID"] == folder and r["ruleGroup"] == title}
        plan = plan_group(group, held, recorded, self.force)
        interval = self._held_interval(folder, title) if held else None
        if held and interval != group["interval"]:
            plan.outcomes.append(
                Outcome("alert-group", title, "updated", f"interval {interval}s -> {group['interval']}s")
            )
        if plan.writes:
            try:
                self.api.alertingprovisioning.update_rule_group(folder, title, {**group, "rules": plan.body})
            except GrafanaClientError as error:
                if error.status_code not in REFUSED_STATUSES:
                    raise
                return [
                    Outcome("alert-group", title, "conflict", f"Grafana refused the group: {error.message}")
                ]
        self._record(plan.written, plan.removed)
        return plan.outcomes


@dataclass
class GroupPlan:
    """What one provisioning run does to the group: the rules to PUT and what to remember."""

    outcomes: list[Outcome] = field(default_factory=list)
    body: list[dict[str, Any]] = field(default_factory=list)
    written: dict[str, str] = field(default_factory=dict)  # uid -> digest of what crashreg writes
    removed: list[str] = field(default_factory=list)

    @property
    def writes(self) -> bool:
        return any(o.action in WRITING_ACTIONS for o in self.outcomes)


WRITING_ACTIONS = ("created", "updated", "overwritten", "removed")


def plan_group(
    group: RuleGroup, held: dict[str, dict[str, Any]], recorded: dict[str, str], force: bool
) -> GroupPlan:
    """Each wanted rule against the one Grafana holds (`held`, by uid) and the digest crashreg
    recorded when it last wrote it: created, unchanged, updated (crashreg's definition moved),
    kept-edited (changed in Grafana: kept as it is there), overwritten (the same, forced)."""
    plan = GroupPlan()
    for rule in group["rules"]:
        uid, digest = rule["uid"], content_hash(comparable(rule))
        current = held.get(uid)
        held_digest = content_hash(comparable(current)) if current is not None else None
        was = recorded.get(uid)
        edited = current is not None and (was != held_digest if was is not None else held_digest != digest)
        if edited and not force:
            since = "changed in Grafana" if was is not None else "not written by crashreg"
            plan.outcomes.append(Outcome("alert-rule", uid, "kept-edited", f"{since}; --force overwrites"))
            plan.body.append(comparable(current or {}))
            continue
        if current is None:
            action = "created"
        else:
            action = "unchanged" if held_digest == digest else "overwritten" if edited else "updated"
        plan.outcomes.append(Outcome("alert-rule", uid, action))
        plan.body.append(rule)
        plan.written[uid] = digest
    wanted = {rule["uid"] for rule in group["rules"]}
    plan.removed = [uid for uid in held if uid not in wanted]
    plan.outcomes += [
        Outcome("alert-rule", uid, "removed", "no longer defined by crashreg") for uid in plan.removed
    ]
    return plan
