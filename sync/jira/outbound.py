"""Registry -> Jira: the one issue per signature, its facts, regressions and confirmed RCAs.

"Never a duplicate ticket": before creating, the issue is looked up in Jira by the
signature's label, so a create whose answer was lost (Jira made the issue, we saw a
timeout) is found and linked on the retry instead of being made twice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from registry.core.events import Event
from registry.core.jira_links import ISSUE_GONE, JiraLink
from registry.core.signatures import Signature
from registry.rca.service import RcaMessage
from registry.signatures.service import stats_subquery
from sync.jira.client import JiraClient, SearchNotSettled
from sync.jira.config import JiraOptions
from sync.jira.content import (
    CRASHREG_LABEL,
    ends_with_marker,
    facts_digest,
    flagged_rca_comment,
    global_id,
    marker,
    merge_description,
    merged_comment,
    merged_marker,
    parse_jira_time,
    rca_comment,
    regression_comment,
    render_facts,
    signature_label,
    summary_line,
)
from sync.jira.facts import collect_facts, host_count, registry_url

log = logging.getLogger("crashreg.jira")
REOPENED, ALREADY_OPEN, NOT_REOPENED = "reopened", "already-open", "not-reopened"
SEARCH_SETTLE = timedelta(minutes=2)


@dataclass
class SyncContext:
    """One unit of sync work: a database session, Jira, the options and the time."""

    session: Session
    client: JiraClient
    options: JiraOptions
    now: datetime
    unconfirmed_create_at: datetime | None = None  # an earlier create of this message got no answer


def find_existing_issue(ctx: SyncContext, fingerprint: str) -> dict[str, Any] | None:
    """The oldest issue carrying the signature's label, if Jira has one."""
    jql = (
        f'project = "{ctx.options.project}" AND labels = "{signature_label(fingerprint)}" '
        "ORDER BY created ASC"
    )
    return next(iter(ctx.client.search(jql, ["labels", "status", "created"], limit=1)), None)


def ensure_issue(ctx: SyncContext, signature: Signature) -> JiraLink:
    """The signature's link, recovered from Jira or made by creating the issue."""
    link = ctx.session.get(JiraLink, signature.id)
    if link is not None:
        return link
    block = render_facts(collect_facts(ctx.session, signature, ctx.options.public_url))
    issue = find_existing_issue(ctx, signature.fingerprint)
    pushed = None
    if issue is None and ctx.unconfirmed_create_at is not None:
        # Cloud's search index lags writes: a search right after a create whose answer was
        # lost can miss the issue. Create again only once the index has had time to settle.
        wait = (ctx.unconfirmed_create_at + SEARCH_SETTLE - ctx.now).total_seconds()
        if wait > 0:
            raise SearchNotSettled(wait)
    if issue is None:
        fields: dict[str, Any] = {
            "project": {"key": ctx.options.project},
            "issuetype": {"name": ctx.options.issue_type},
            "summary": summary_line(signature.title),
            "description": merge_description(None, block),
            "labels": [CRASHREG_LABEL, signature_label(signature.fingerprint)],
        }
        if ctx.options.signature_field:
            fields[ctx.options.signature_field] = signature.fingerprint
        issue = ctx.client.create_issue(fields)
        pushed = ctx.now
        log.info("created Jira issue", extra={"fields": {"issue": issue["key"],
                                                         "signature": signature.id}})
    else:
        log.info("linked existing Jira issue", extra={"fields": {"issue": issue["key"],
                                                                 "signature": signature.id}})
    link_back(ctx, issue["key"], signature)
    link = JiraLink(
        signature_id=signature.id,
        issue_key=issue["key"],
        issue_id=str(issue["id"]),
        url=f"{ctx.options.url}/browse/{issue['key']}",
        facts_digest=facts_digest(block) if pushed else None,
        facts_pushed_at=pushed,
        last_synced_at=ctx.now,
        failures=0,
    )
    ctx.session.add(link)
    ctx.session.flush()
    return link


def applied_everything(link: JiraLink, updated: datetime | None) -> bool:
    """Whether the issue, as read before a write of ours, had nothing the sync had not applied:
    then the `updated` our write gives it is our own echo, no news for the inbound side (taken
    as news, it put back a "done" over a regression Jira was not to reopen)."""
    return link.jira_updated_at is not None and updated is not None and updated <= link.jira_updated_at


def link_back(ctx: SyncContext, key: str, signature: Signature) -> None:
    """The issue's remote link to the signature's page (one per signature: its global id)."""
    ctx.client.upsert_remote_link(
        key, global_id(signature.fingerprint),
        registry_url(ctx.options.public_url, signature), f"crashreg: {summary_line(signature.title)}",
    )


def push_facts(ctx: SyncContext, signature: Signature, link: JiraLink) -> bool:
    """Rewrite the facts block if it changed; text outside the block is left as it is. An
    issue linked by reconciliation (found by its labels: a create whose answer was lost, a gone
    issue's successor) gets its remote link with its first facts."""
    block = render_facts(collect_facts(ctx.session, signature, ctx.options.public_url))
    digest = facts_digest(block)
    if link.facts_pushed_at is None:
        link_back(ctx, link.issue_key, signature)
    if digest != link.facts_digest:
        current = ctx.client.issue(link.issue_key, "description,labels,updated").get("fields", {})
        changes: dict[str, Any] = {}
        merged = merge_description(current.get("description"), block)
        if merged != current.get("description"):
            changes["description"] = merged
        labels = current.get("labels") or []
        # both: the signature's (new after a fingerprint rebuild), and `crashreg`, which
        # reconciliation and the webhook's JQL select by (someone may have removed it)
        missing = [x for x in (CRASHREG_LABEL, signature_label(signature.fingerprint)) if x not in labels]
        if missing:
            changes["labels"] = [*labels, *missing]
        if changes:
            ctx.client.update_issue(link.issue_key, changes)
            if applied_everything(link, parse_jira_time(current.get("updated"))):
                link.jira_updated_at = parse_jira_time(
                    ctx.client.issue(link.issue_key, "updated")["fields"]["updated"])
    changed = digest != link.facts_digest
    link.facts_digest, link.facts_pushed_at = digest, ctx.now
    link.last_synced_at, link.last_error, link.failures = ctx.now, None, 0
    return changed


def mark_gone(link: JiraLink, now: datetime) -> None:
    """Jira no longer has the issue: stop updating it (each try failed again, and the dead links,
    oldest first, filled every round's batch), and say how to recover."""
    link.status_category = ISSUE_GONE
    link.last_error = (f"Jira issue {link.issue_key} is gone (deleted, or the sync user cannot see it): "
                       "no longer updated; give an issue the labels crashreg and "
                       "crashreg-sig-<fingerprint> and reconciliation links it instead")
    link.failures += 1
    link.last_synced_at = now
    log.warning("Jira issue gone", extra={"fields": {"issue": link.issue_key,
                                                     "signature": link.signature_id}})


def post_comment_once(ctx: SyncContext, key: str, body: str, tag: str) -> None:
    """Comments end with a marker; a retried post whose first answer was lost is not repeated.
    Only a comment ending with the marker counts: one quoting it elsewhere is not ours."""
    if not any(ends_with_marker(existing, tag) for existing in ctx.client.comments(key)):
        ctx.client.add_comment(key, body)


def reopen(ctx: SyncContext, key: str) -> str:
    """Move the issue out of done through a transition into the configured category."""
    status = ctx.client.issue(key, "status")["fields"]["status"]["statusCategory"]["key"]
    if status != "done":
        return ALREADY_OPEN  # an engineer (or our own earlier try) reopened it
    wanted = ctx.options.reopen_category
    choices = [t for t in ctx.client.transitions(key) if t["to"]["statusCategory"]["key"] == wanted]
    if wanted == "none" or not choices:
        return NOT_REOPENED
    ctx.client.transition(key, choices[0]["id"])
    return REOPENED


def on_signature_created(ctx: SyncContext, signature: Signature, payload: dict[str, Any]) -> None:
    facts = collect_facts(ctx.session, signature, ctx.options.public_url)
    if ctx.options.create_rule.allows(facts.events, facts.hosts):
        ensure_issue(ctx, signature)


def on_signature_regressed(ctx: SyncContext, signature: Signature, payload: dict[str, Any]) -> None:
    link = ensure_issue(ctx, signature)
    event = ctx.session.get(Event, payload.get("event_id")) if payload.get("event_id") else None
    outcome = reopen(ctx, link.issue_key)
    body = regression_comment(
        event.hostname if event else "a host",
        event.kernel_version if event else None,
        event.crashed_at.isoformat() if event else ctx.now.isoformat(),
        signature.fixed_in_kernel,
        outcome,
        payload.get("event_id") or 0,
    )
    post_comment_once(ctx, link.issue_key, body, marker("regression", payload.get("event_id") or 0))
    # What Jira looks like after our own changes is not news for the inbound side.
    after = ctx.client.issue(link.issue_key, "status,updated")["fields"]
    link.status_category = after["status"]["statusCategory"]["key"]
    link.jira_updated_at = parse_jira_time(after["updated"])
    link.last_synced_at, link.last_error, link.failures = ctx.now, None, 0


def on_signature_merged(ctx: SyncContext, survivor: Signature, payload: dict[str, Any]) -> None:
    """The merged signature's issue says where it went, once; the survivor's facts follow from
    its changed counts (links_due_for_facts)."""
    link = ctx.session.get(JiraLink, payload.get("other"))
    if link is None or link.status_category == ISSUE_GONE:
        return
    survivor_link = ctx.session.get(JiraLink, survivor.id)
    body = merged_comment(survivor.id, registry_url(ctx.options.public_url, survivor),
                          survivor_link.issue_key if survivor_link else None, link.signature_id)
    post_comment_once(ctx, link.issue_key, body, merged_marker(link.signature_id, survivor.id))
    link.last_synced_at, link.last_error, link.failures = ctx.now, None, 0


def rca_commenter(
    render: Callable[[RcaMessage], str], kind: str
) -> Callable[[SyncContext, Signature, RcaMessage], None]:
    """A handler posting an RCA outbox message as a comment, once per RCA."""

    def comment(ctx: SyncContext, signature: Signature, payload: RcaMessage) -> None:
        link = ensure_issue(ctx, signature)
        post_comment_once(ctx, link.issue_key, render(payload), marker(kind, str(payload.get("rca_id"))))
        link.last_synced_at, link.last_error, link.failures = ctx.now, None, 0

    return comment


on_rca_confirmed = rca_commenter(rca_comment, "rca")
on_rca_flagged = rca_commenter(flagged_rca_comment, "rca-flagged")


def links_due_for_facts(session: Session, options: JiraOptions, now: datetime, limit: int) -> list[JiraLink]:
    """Links whose signature changed since the last push, and whose throttle interval is over."""
    stats = stats_subquery()
    quiet_since = now - options.update_interval
    query = (
        select(JiraLink)
        .join(Signature, Signature.id == JiraLink.signature_id)
        .outerjoin(stats, stats.c.signature_id == JiraLink.signature_id)
        .where(
            JiraLink.status_category.is_distinct_from(ISSUE_GONE),
            Signature.merged_into_id.is_(None),  # its counts moved: its issue keeps its last facts
            (JiraLink.facts_pushed_at.is_(None))
            | (
                (JiraLink.facts_pushed_at <= quiet_since)
                & (
                    (stats.c.last_seen > JiraLink.facts_pushed_at)
                    | (Signature.updated_at > JiraLink.facts_pushed_at)
                )
            )
        )
        .order_by(JiraLink.facts_pushed_at.is_not(None), JiraLink.facts_pushed_at)
        .limit(limit)
    )
    return list(session.scalars(query))


def unlinked_signatures_meeting_rule(session: Session, options: JiraOptions, limit: int) -> list[Signature]:
    """For threshold create rules: signatures that have now earned an issue. The whole rule is
    the query's: a batch taken first and checked after filled up with signatures that do not
    meet it (200 single-host ones kept a hosts>=2 rule from ever filing)."""
    stats = stats_subquery()
    query = (
        select(Signature)
        .join(stats, stats.c.signature_id == Signature.id)
        .outerjoin(JiraLink, JiraLink.signature_id == Signature.id)
        .where(
            JiraLink.signature_id.is_(None),
            Signature.merged_into_id.is_(None),
            Signature.status != "ignored",
            stats.c.event_count >= options.create_rule.min_events,
        )
        .order_by(Signature.id)
        .limit(limit)
    )
    if options.create_rule.min_hosts > 1:  # a count over the events: only when the rule has one
        query = query.where(host_count(Signature.id) >= options.create_rule.min_hosts)
    return list(session.scalars(query))
