"""Jira -> registry: read an issue back and apply what engineers did to its signature.

Webhooks and reconciliation both end here with the issue as Jira has it now, so the
order deliveries arrive in cannot matter.
"""

from __future__ import annotations

import logging
from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from registry import domains
from registry.core.jira_links import ISSUE_GONE, JiraLink
from registry.core.signatures import Signature
from registry.core.wiring import SignatureListeners
from registry.jira.state import JiraComment
from registry.outbox import OutboxMessage
from registry.requests import storable_text
from registry.signatures.merging import merge
from registry.signatures.regression import fixed_kernel_from_versions
from registry.signatures.service import canonical, find_signature
from sync.jira.client import issue_is_gone
from sync.jira.content import fingerprint_from_labels, parse_jira_time
from sync.jira.mapping import decide
from sync.jira.outbound import SyncContext, mark_gone

log = logging.getLogger("crashreg.jira")
INBOUND_FIELDS = ["status", "resolution", "resolutiondate", "fixVersions", "assignee", "labels",
                  "issuelinks", "updated", "comment"]
OWNER_CHARS = Signature.__table__.c.owner.type.length
RESOLUTION_CHARS = Signature.__table__.c.resolution.type.length
KERNEL_CHARS = Signature.__table__.c.fixed_in_kernel.type.length
KEPT_COMMENTS = 20  # the latest ones, for triage bundles; the issue itself has them all
COMMENT_CHARS = 4000


def comment_text(body: Any) -> str:
    """A comment body as text: a string (REST v2) or Atlassian document format (v3)."""
    if isinstance(body, str):
        return body
    if isinstance(body, dict):
        return body.get("text", "") + "".join(comment_text(node) for node in body.get("content", []))
    return ""


def jira_text(value: Any, limit: int | None = None) -> str | None:
    """Text Jira sent, as the registry's columns can hold it (a NUL in one comment made
    PostgreSQL refuse the whole round); None stays None."""
    return storable_text(value)[:limit] if isinstance(value, str) else None


def latest_comments(field: dict[str, Any] | None) -> list[JiraComment]:
    comments = (field or {}).get("comments") or []
    return [
        {
            "author": jira_text((c.get("author") or {}).get("displayName")),
            "created": jira_text(c.get("created")),
            "body": jira_text(comment_text(c.get("body")), COMMENT_CHARS) or "",
        }
        for c in comments[-KEPT_COMMENTS:]
    ]


def point_at(link: JiraLink, issue: dict[str, Any], options_url: str) -> JiraLink:
    """The link now names `issue` (its key changed in a move, or it replaces a gone one)."""
    link.issue_key, link.issue_id = issue["key"], str(issue["id"])
    link.url = f"{options_url}/browse/{issue['key']}"
    return link


def link_for_issue(session: Session, issue: dict[str, Any], options_url: str) -> JiraLink | None:
    """The link by issue key, or by issue id (a moved issue keeps its id, not its key), or
    rebuilt from the issue's signature label if the row was lost."""
    link = session.scalar(select(JiraLink).where(JiraLink.issue_key == issue["key"]))
    if link is not None:
        return link
    moved = session.scalar(select(JiraLink).where(JiraLink.issue_id == str(issue["id"])))
    if moved is not None:
        log.info("Jira issue moved, relinked", extra={"fields": {
            "issue": issue["key"], "was": moved.issue_key, "signature": moved.signature_id}})
        point_at(moved, issue, options_url)
        session.flush()
        return moved
    fingerprint = fingerprint_from_labels(issue["fields"].get("labels") or [])
    # through aliases too: the label may carry a fingerprint from before a rebuild or merge
    signature = find_signature(session, fingerprint) if fingerprint else None
    if signature is None:
        return None
    existing = session.get(JiraLink, signature.id)
    if existing is not None and existing.status_category == ISSUE_GONE:
        log.info("Jira issue gone, relinked", extra={"fields": {
            "issue": issue["key"], "gone": existing.issue_key, "signature": signature.id}})
        point_at(existing, issue, options_url)
        existing.facts_digest = existing.facts_pushed_at = existing.jira_updated_at = None  # all new
        session.flush()
        return existing
    if existing is not None:  # made by hand, or a create Jira's search had not indexed yet
        existing.last_error = (f"Jira has a second issue {issue['key']} for this signature; "
                               f"crashreg keeps {existing.issue_key}: close {issue['key']} as its duplicate")
        log.warning("second Jira issue for a signature", extra={"fields": {
            "issue": issue["key"], "kept": existing.issue_key, "signature": signature.id}})
        return None
    link = JiraLink(signature_id=signature.id, issue_key=issue["key"], issue_id=str(issue["id"]),
                    url=f"{options_url}/browse/{issue['key']}", failures=0)
    session.add(link)
    session.flush()
    log.info("recovered Jira link from labels", extra={"fields": {"issue": issue["key"]}})
    return link


def duplicate_target(session: Session, issue: dict[str, Any], own: Signature) -> Signature | None:
    """The signature now standing for the crashreg issue this one duplicates (Jira's
    Duplicate link); possibly `own` itself, when that issue was already merged into this one."""
    for link in issue["fields"].get("issuelinks") or []:
        if link.get("type", {}).get("name") != "Duplicate" or "outwardIssue" not in link:
            continue
        other = session.scalar(
            select(JiraLink).where(JiraLink.issue_key == link["outwardIssue"]["key"])
        )
        if other is not None and other.signature_id != own.id:
            return canonical(session, session.get_one(Signature, other.signature_id))
    return None


@cache
def signature_listeners() -> SignatureListeners:
    """The domains' listeners a merge tells (captures follow their events, as in the API's merge)."""
    return domains.wiring().signatures


def merge_duplicate(ctx: SyncContext, issue: dict[str, Any], signature: Signature) -> None:
    """Jira's Duplicate resolution is the registry's own merge (alias rule, events, counters),
    the one POST /signatures/{id}/merge makes; never one that would fold a signature into itself."""
    target = duplicate_target(ctx.session, issue, signature)
    if target is None:
        return  # not a duplicate of one of ours
    if target.id == signature.id:
        refusal = "the issue it duplicates is merged into this one: merging back would be a cycle"
    elif canonical(ctx.session, signature).id == target.id:
        return  # merged already: reconciliation reads issues again
    elif signature.merged_into_id is not None:
        refusal = f"already merged into signature {signature.merged_into_id}"
    else:
        refusal = None
    if refusal is not None:
        log.warning("Jira duplicate not merged", extra={"fields": {
            "issue": issue["key"], "signature": signature.id, "reason": refusal}})
        return
    merge(ctx.session, target, signature, f"jira:{issue['key']}", signature_listeners())
    log.info("merged Jira duplicate", extra={"fields": {
        "issue": issue["key"], "signature": signature.id, "into": target.id}})


def jira_has_news(session: Session, link: JiraLink, signature: Signature, category: str,
                  updated: datetime | None) -> bool:
    """Whether Jira's status should be applied: it changed since we last applied it, and no
    regression of ours is still on its way to Jira (that would put back an outdated "done")."""
    unchanged = (
        link.jira_updated_at is not None and updated is not None
        and updated <= link.jira_updated_at and category == link.status_category
    )
    if unchanged:
        return False
    pending_regression = session.scalar(
        select(OutboxMessage.id).where(
            OutboxMessage.signature_id == signature.id,
            OutboxMessage.topic == "signature.regressed",
            OutboxMessage.processed_at.is_(None),
        ).limit(1)
    )
    return pending_regression is None


def restates_applied_resolution(link: JiraLink, signature: Signature, category: str,
                                resolved_at: datetime | None) -> bool:
    """Whether a done issue only re-states the resolution the sync already applied (done when last
    read, resolved at the same time): any edit (a comment, a fix version) bumps `updated`, but only
    a new resolution overrides what the registry did since (a regression Jira was not to reopen,
    a status set through the API)."""
    return (category == link.status_category == "done" and resolved_at is not None
            and resolved_at == signature.resolved_at)


def apply_issue(ctx: SyncContext, issue: dict[str, Any]) -> bool:
    """Apply the issue's state to its signature; False when the issue is not one of ours."""
    link = link_for_issue(ctx.session, issue, ctx.options.url)
    if link is None:
        return False
    fields = issue["fields"]
    signature = ctx.session.get_one(Signature, link.signature_id)
    category = fields["status"]["statusCategory"]["key"]
    updated = parse_jira_time(fields.get("updated"))
    resolution = (fields.get("resolution") or {}).get("name")
    before = (signature.status, signature.owner, signature.resolution, signature.merged_into_id)
    resolved_at = parse_jira_time(fields.get("resolutiondate"))
    if jira_has_news(ctx.session, link, signature, category, updated):
        outcome = decide(category, resolution, signature.status)
        if not restates_applied_resolution(link, signature, category, resolved_at):
            signature.status = outcome.status
        if outcome.resolved:
            versions = [jira_text(v["name"]) or "" for v in fields.get("fixVersions") or []]
            signature.resolution = jira_text(resolution, RESOLUTION_CHARS)
            signature.resolved_at = resolved_at or ctx.now
            signature.fix_versions = versions
            kernels = [name for name in versions if len(name) <= KERNEL_CHARS]  # no kernel is longer
            signature.fixed_in_kernel = fixed_kernel_from_versions(kernels) or signature.fixed_in_kernel
        elif before[0] in ("resolved", "ignored") and outcome.status != before[0]:
            signature.resolution, signature.resolved_at = None, None
        if outcome.merge:
            merge_duplicate(ctx, issue, signature)
    assignee = fields.get("assignee")
    signature.owner = jira_text((assignee or {}).get("displayName"), OWNER_CHARS) if assignee else None
    if (signature.status, signature.owner, signature.resolution, signature.merged_into_id) != before:
        signature.updated_at = ctx.now
        log.info("applied Jira state", extra={"fields": {
            "issue": issue["key"], "signature": signature.id, "status": signature.status}})
    link.status_category = category
    link.comments = latest_comments(fields.get("comment"))
    link.jira_updated_at = updated
    link.last_synced_at, link.last_error, link.failures = ctx.now, None, 0
    return True


def on_issue_changed(ctx: SyncContext, signature: Signature | None, payload: dict[str, Any]) -> None:
    """A webhook hint: read the issue back from Jira and apply it. A hint for an issue Jira does
    not show the bot (unknown, or deleted since) is dropped: a refusal would only repeat."""
    key = payload["issue_key"]
    try:
        issue = ctx.client.issue(key, ",".join(INBOUND_FIELDS) + ",key")
    except Exception as error:
        if not issue_is_gone(error):
            raise
        log.info("Jira hint dropped: no such issue for the sync user", extra={"fields": {"issue": key}})
        link = ctx.session.scalar(select(JiraLink).where(JiraLink.issue_key == key))
        if link is not None:
            mark_gone(link, ctx.now)
        return
    apply_issue(ctx, issue)
